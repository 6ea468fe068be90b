package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver"
)

const ingestUsage = `Usage: dedupeworker ingest [connection flags]

Receives webhooks over HTTP on DEDUPE_INGEST_ADDR: POST /hooks/<tenant>/<source>. Each delivery is checked by its
source's verify block in the sources file (DEDUPE_SOURCES_FILE or DEDUPE_SOURCES, as the worker reads them), then
published to <DEDUPE_INPUT_PREFIX>.<tenant>.<source> with its body and headers and Ingest-Verified: true (or false,
for a source with on_invalid: forward), and answered 202 once the input stream DEDUPE_INPUT_STREAM stored it.
Answers: 401 bad or missing signature, 404 unknown tenant or source, 405 not POST, 408 body not in within
DEDUPE_INGEST_BODY_TIMEOUT, 413 body too large, 431 headers too large, 503 with Retry-After when JetStream did not
store it, did not confirm it in time, or ingest is busy. A verified delivery is keyed on the id its signature or
provider gives (400 when a header carries another id); for github and shopify (hmac with replay_guard: on) a signed
body seen before under another id is answered 202 and not published (the replay guard, in the bucket
<DEDUPE_BUCKET>-replay, which ingest creates). /metrics, /healthz and /readyz on the same address.

Every declared source needs a verify block (verify: none accepts unsigned deliveries). With no sources document,
each preset source is served once it has a secret. Secrets are never read from the sources file:
  DEDUPE_INGEST_SECRET_<SOURCE>   a source's secrets for every tenant, comma separated (source id in upper case,
                                  '-' as '_': DEDUPE_INGEST_SECRET_GITHUB)
  DEDUPE_INGEST_SECRETS_DIR       files named <source> (every tenant) or <tenant>.<source>, one secret per line;
                                  a tenant's own file replaces the source's secrets for that tenant
List several secrets during a rotation: a delivery verifies if any matches.

The connection is the worker's (flags below, DEDUPE_NATS_*, NATS_* and nats CLI contexts); with none of them it
connects to nats://DEDUPE_EMBEDDED_LISTEN, where a worker started without settings runs its embedded server.

Every setting is an environment variable:

`

// runIngest is `dedupeworker ingest`. Configuration errors (settings, sources, secrets, verify blocks) are found
// before connecting and exit 2; a connection that cannot be made exits 1.
func runIngest(ctx context.Context, args []string, stderr io.Writer) error {
	rs, err := startRole("ingest", ingestUsage, args, stderr)
	if err != nil {
		return err
	}
	cfg, sources, fromPresets := rs.cfg, rs.sources, rs.fromPresets
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{
		Dir: cfg.IngestSecretsDir, Environ: os.Environ(), Sources: sources.IDs(),
	})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: sources, FromPresets: fromPresets, Secrets: secrets, DefaultTTL: cfg.DefaultTTL})
	if err != nil {
		// A source's fault is placed in its document, as the worker's are; presets have none (even when an
		// empty document made them the sources).
		if o, ok := configuredSources(cfg); ok && !fromPresets {
			err = o.placeErrors(err, false)
		}
		return &exitError{code: exitUsage, err: err}
	}
	return (&ingest{roleStart: rs, policy: policy, secrets: secrets}).run(ctx)
}

// ingest owns a running receiver's NATS connection and (inside Receiver.Serve) HTTP server; HTTP stops first, its
// requests finishing up to their PubAck, then the connection drains.
type ingest struct {
	*roleStart
	policy  *receiver.Policy
	secrets *receiver.Secrets
}

func (in *ingest) run(ctx context.Context) (err error) {
	cfg, log := in.cfg, in.log
	in.logStart("starting dedupeworker ingest", config.RoleIngest,
		"each preset is a source, served once it has a secret")
	for _, s := range in.policy.Sources() {
		tenants := "every tenant"
		if len(s.Tenants) > 0 && !s.AllTenant {
			tenants = strings.Join(s.Tenants, ",")
		} else if len(s.Tenants) > 0 {
			tenants = "every tenant; own secrets for " + strings.Join(s.Tenants, ",")
		}
		attrs := []any{"source", s.Source, "verify", s.Scheme, "on_invalid", s.OnInvalid, "tenants", tenants, "replay_guard", s.ReplayGuard}
		if s.KeyHeader != "" {
			attrs = append(attrs, "key_bound_to", s.KeyHeader)
		}
		log.Info("receiving source", attrs...)
	}
	var waiting []string // presets without a secret: expected on a first start, not a fault
	for _, u := range in.policy.Unserved() {
		if in.fromPresets {
			waiting = append(waiting, u.Source)
			continue
		}
		log.Warn("source not served (404)", "source", u.Source, "reason", u.Reason)
	}
	if len(waiting) > 0 {
		log.Info("presets without a secret are not served (404) until they have one: DEDUPE_INGEST_SECRET_<SOURCE> "+
			"or a file in DEDUPE_INGEST_SECRETS_DIR", "sources", waiting)
	}
	log.Info("signing secrets loaded", "secrets", in.secrets) // counts and origins only (Secrets.LogValue)

	stopLogged, waitStopLine := logStopping(ctx, log)
	defer waitStopLine()

	// The address first, with health and metrics on it: a receiver that cannot reach NATS answers its probes
	// (/readyz 503 with the step it waits for) and deliveries (503, Retry-After) while it waits.
	ln, err := net.Listen("tcp", cfg.IngestAddr)
	if err != nil {
		return failErr(fmt.Errorf("ingest: %w", listenError("DEDUPE_INGEST_ADDR", cfg.IngestAddr, "ingest", err)))
	}
	reg := newRoleRegistry()
	metrics := receiver.NewMetrics(reg)
	hand, startLn := newHandoff(ln)
	starting := &http.Server{Handler: startingHandler(&in.status, reg, receiver.DefaultRetryAfter), ReadHeaderTimeout: 5 * time.Second}
	startingDone := make(chan struct{})
	go func() {
		defer close(startingDone)
		_ = starting.Serve(startLn) // http.ErrServerClosed; a failed listener fails the receiver's Serve as well
	}()
	stopStarting := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if starting.Shutdown(sctx) != nil {
			_ = starting.Close()
		}
		<-startingDone
	}
	log.Info("serving health and metrics while starting", "addr", ln.Addr().String())

	rcv, nc, err := in.start(ctx, metrics, reg)
	if nc != nil {
		total := cfg.ShutdownTimeout
		defer func() {
			if derr := drainNATS(nc, total-pipelineShutdownBudget(total)); derr != nil {
				err = errors.Join(err, derr)
			} else if err == nil {
				log.Info("stopped")
			}
		}()
	}
	if err != nil {
		if ctx.Err() != nil {
			<-stopLogged // the stop line before the shutdown's
		}
		stopStarting() // the last share of the listener: the port closes
		if ctx.Err() != nil {
			if nc == nil {
				log.Info("stopped")
			}
			return nil // stopped while starting: what was asked, and said by the stop line
		}
		return err
	}
	rcvLn := hand.next()
	stopStarting()
	log.Info("receiving webhooks", "addr", ln.Addr().String(), "route", "POST "+receiver.HookPrefix+"<tenant>/<source>",
		"subject", cfg.InputPrefix+".<tenant>.<source>", "stream", cfg.InputStream)
	serr := rcv.Serve(ctx, rcvLn)
	if ctx.Err() != nil {
		<-stopLogged // the stop line before the shutdown's "stopped"
	}
	return failErr(serr)
}

// start connects, checks that JetStream answers and builds the receiver, recording each step in in.status for
// /readyz. The connection is returned whenever it was made, for the caller to drain.
func (in *ingest) start(ctx context.Context, metrics *receiver.Metrics, reg *prometheus.Registry) (*receiver.Receiver, *nats.Conn, error) {
	cfg, log := in.cfg, in.log
	natsCfg := in.natsCfg
	if in.embeddedNATS {
		natsCfg.URL = "nats://" + cfg.EmbeddedListen
		natsCfg.Origin = joinOrigin("url from DEDUPE_EMBEDDED_LISTEN (no NATS server configured: a worker's embedded server)", natsCfg.Origin)
	}
	nc, js, perr, err := in.connect(ctx, natsCfg, "dedupeworker-ingest", func(nc *nats.Conn) { in.checkLimits(nc.MaxPayload()) })
	if err != nil {
		return nil, nc, err
	}
	if perr != nil && ctx.Err() == nil {
		log.Warn("input stream not found yet: deliveries are answered 503 until it exists (the worker creates it)",
			"stream", cfg.InputStream, "err", perr)
	}

	var window receiver.ReplayWindow
	if guarded := in.policy.Guarded(); len(guarded) > 0 {
		w, err := in.openWindow(ctx, js)
		if err != nil {
			return nil, nc, failErr(err)
		}
		log.Info("replay guard on", "sources", guarded, "bucket", cfg.Bucket+replayBucketSuffix)
		window = w
	}

	rcv, err := receiver.New(receiver.Config{
		JetStream:        js,
		Policy:           in.policy,
		Window:           window,
		InputStream:      cfg.InputStream,
		InputPrefix:      cfg.InputPrefix,
		MaxBody:          int64(cfg.IngestMaxBody),
		MaxHeaderBytes:   cfg.IngestMaxHeaderBytes,
		PublishTimeout:   cfg.IngestPublishTimeout,
		MaxInFlight:      cfg.IngestMaxInFlight,
		MaxBufferedBytes: cfg.IngestMaxBuffered(),
		BodyTimeout:      cfg.IngestBodyTimeout,
		ShutdownTimeout:  pipelineShutdownBudget(cfg.ShutdownTimeout),
		Logger:           log,
		Metrics:          metrics,
		Gatherer:         reg,
	})
	if err != nil {
		return nil, nc, &exitError{code: exitUsage, err: err}
	}
	return rcv, nc, nil
}

// replayBucketSuffix names the replay guard's bucket after the worker's window: <DEDUPE_BUCKET>-replay.
const replayBucketSuffix = "-replay"

// openWindow binds to (or creates) the replay guard's bucket: a bucket of its own, <DEDUPE_BUCKET>-replay,
// unsharded, with DEDUPE_REPLICAS replicas. Not the worker's window: the receiver's NATS user writes only there, so
// that a leaked receiver credential cannot claim (and so suppress) an event in the worker's. A window that cannot
// be reached yet (a cluster still electing leaders) or is refused (a user without the permissions of
// deploy/nats-permissions.yaml) is retried, with backoff and deliveries answered 503, until ctx ends.
func (in *ingest) openWindow(ctx context.Context, js jetstream.JetStream) (*kvwindow.Window, error) {
	wcfg := kvwindow.Config{Bucket: in.cfg.Bucket + replayBucketSuffix, Shards: 1, Provision: true,
		Replicas: in.cfg.Replicas, Storage: jetstream.FileStorage,
		// A bucket made by hand with an age limit shorter than a source's TTL would forget bodies early: refused.
		MaxTTL: in.policy.GuardTTL()}
	return openRetrying(ctx, in.log, &in.status, wcfg.Bucket, wcfg.Replicas, "", "replay guard: its bucket cannot be opened yet",
		"the replay guard's bucket", func() (*kvwindow.Window, error) { return kvwindow.New(ctx, js, wcfg) }, nil)
}

// checkLimits warns when the NATS server's max_payload is below what the settings let through: bodies over it are
// answered 413, and when that is not above DEDUPE_MAX_JSON_BYTES the worker's too-large outcome is unreachable.
func (in *ingest) checkLimits(maxPayload int64) {
	cfg, log := in.cfg, in.log
	body := int64(cfg.IngestMaxBody)
	if room := maxPayload - int64(cfg.IngestMaxHeaderBytes); room < body {
		log.Warn("the NATS server's max_payload is below DEDUPE_INGEST_MAX_BODY + DEDUPE_INGEST_MAX_HEADER_BYTES: larger deliveries are answered 413",
			"max_payload", maxPayload, "DEDUPE_INGEST_MAX_BODY", cfg.IngestMaxBody, "DEDUPE_INGEST_MAX_HEADER_BYTES", cfg.IngestMaxHeaderBytes,
			"fix", "raise max_payload on the server (the worker's embedded server uses max(8 MiB, 2 x DEDUPE_MAX_JSON_BYTES + 64 KiB))")
		body = max(room, 0)
	}
	if body <= int64(cfg.MaxJSONBytes) {
		log.Warn("ingest accepts no body larger than DEDUPE_MAX_JSON_BYTES: the worker's too-large reason is unreachable, such deliveries are answered 413 instead",
			"accepted_body_bytes", body, "DEDUPE_MAX_JSON_BYTES", cfg.MaxJSONBytes)
	}
}

// drainNATS drains the connection (what it published is flushed) within timeout, else closes it.
func drainNATS(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return nil
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		nc.Close()
		return errors.New("nats drain: timed out")
	}
}
