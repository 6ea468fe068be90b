package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/embedded"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

const runUsage = `Usage: dedupeworker [run]

Runs the worker: consumes raw envelopes from JetStream, claims each event's key in the dedupe window and
republishes the first copy of every event. The connection comes from the flags below, else DEDUPE_NATS_*, else
NATS_URL / NATS_* and the nats CLI's selected context; with none of them it starts an embedded JetStream server.
Every setting is an environment variable:

`

func runWorker(ctx context.Context, args []string, stderr io.Writer) error {
	rs, err := startRole("run", runUsage, args, stderr)
	if err != nil {
		return err
	}
	return (&worker{roleStart: rs}).run(ctx)
}

// worker owns every long-lived part of a running worker and shuts them down in the reverse order of start.
type worker struct {
	*roleStart

	srv      *embedded.Server
	nc       *nats.Conn
	window   *kvwindow.Window // closed by shutdown, after the pipeline and before the connection
	pipe     *pipeline.Pipeline
	httpSrv  *http.Server
	httpDone chan error
}

func (w *worker) run(ctx context.Context) (err error) {
	log := w.log
	w.logStart("starting dedupeworker", config.RoleRun, "declaring one source per preset", "sources", w.sources.IDs())
	for _, id := range w.sources.WithoutDedupe {
		log.Warn("source declares no dedupe: every provider retry becomes a new event", "source", id)
	}
	defer func() {
		if serr := w.shutdown(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	// Say why the worker stops when it starts to ("stopping: received SIGTERM"), before the shutdown's own lines.
	_, waitStopLine := logStopping(ctx, log)
	defer waitStopLine()

	// Health and metrics before anything that can wait: a worker that cannot reach NATS or its window answers its
	// probes (/readyz 503 with the step it waits for) and is scraped (dedupeworker_ready 0) while it waits.
	reg := newRoleRegistry()
	metrics := pipeline.NewMetrics(reg)
	if err := w.serveHTTP(reg); err != nil {
		return failErr(err)
	}
	if err := w.start(ctx, metrics); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: what was asked, and said by the stop line
		}
		return err
	}
	if err := w.pipe.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		// A stream or consumer that cannot serve these settings, or a missing consumer on a stream that keeps
		// processed envelopes (DEDUPE_CONSUMER_START must say where to begin), is a configuration conflict that a
		// restart meets again until the settings or the stream change.
		if errors.Is(err, pipeline.ErrIncompatible) || errors.Is(err, pipeline.ErrConsumerStart) {
			return &exitError{code: exitUsage, err: err}
		}
		return failErr(err)
	}
	if ctx.Err() == nil {
		log.Info("stopping: input consumption ended")
	}
	return nil
}

// start connects (starting the embedded server first when no server is configured), checks that JetStream
// answers, binds the window and builds the pipeline, recording each step in w.status for /readyz.
func (w *worker) start(ctx context.Context, metrics *pipeline.Metrics) (err error) {
	cfg, log := w.cfg, w.log
	natsCfg := w.natsCfg
	if w.embeddedNATS {
		w.status.wait("starting the embedded NATS server on %s", cfg.EmbeddedListen)
		w.srv, err = embedded.Start(ctx, embedded.Config{Listen: cfg.EmbeddedListen, StoreDir: cfg.EmbeddedStoreDir, Logger: log,
			MaxPayload: embedded.MaxPayloadFor(cfg.MaxJSONBytes)})
		if errors.Is(err, embedded.ErrStoreInUse) {
			// Two workers configured onto one directory: a configuration error, as a busy DEDUPE_HTTP_ADDR is not.
			return &exitError{code: exitUsage, err: err}
		}
		if err != nil {
			return failErr(err)
		}
		natsCfg.URL = w.srv.ClientURL()
		if natsCfg.Origin != embeddedFlagOrigin {
			natsCfg.Origin = joinOrigin("the embedded server (no NATS server configured)", natsCfg.Origin)
		}
		log.Info("embedded NATS server with JetStream started", "url", natsCfg.URL, "store", cfg.EmbeddedStoreDir)
	}
	// A publish buffered when the process is frozen must not go out after the freeze, when another replica may have
	// published the event longer ago than the output's duplicate window.
	natsCfg.PauseFence = natsconn.DefaultPauseFence
	var js jetstream.JetStream
	var perr error
	if w.nc, js, perr, err = w.connect(ctx, natsCfg, "dedupeworker", nil); err != nil {
		return err
	}
	if w.natsFromCLI != "" && cfg.Provision && errors.Is(perr, jetstream.ErrStreamNotFound) {
		// The nats CLI's configuration points at whatever server a person last used: say where the streams go.
		log.Warn("creating the worker's streams, window bucket and consumer on the server "+w.natsFromCLI+" names, "+
			"not one the worker's settings name (set DEDUPE_NATS_URL to choose, or DEDUPE_PROVISION=false)",
			"server", natsconn.Redact(w.nc.ConnectedUrlRedacted()), "from", natsCfg.Origin, "streams", []string{cfg.InputStream, cfg.OutputStream, cfg.DLQStream},
			"bucket", cfg.Bucket)
	}

	w.status.wait("waiting for the dedupe window %s", cfg.Bucket)
	window, err := w.openWindow(ctx, js)
	if err != nil {
		return failErr(err)
	}
	w.window = window
	pc := pipelineConfig(cfg)
	pc.JetStream, pc.Window, pc.Sources, pc.Logger, pc.Metrics = js, window, w.sources, log, metrics
	w.pipe, err = pipeline.New(pc)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	w.status.running(w.pipe.Ready)
	return nil
}

// openWindow binds to (or provisions) the window bucket. A window that cannot be reached yet — a cluster still
// electing leaders, another replica creating the bucket at the same moment, a cluster that cannot place its
// replicas yet — is waited for, with backoff, until ctx ends; anything else (no bucket and provisioning off, an incompatible bucket) stops the start.
func (w *worker) openWindow(ctx context.Context, js jetstream.JetStream) (*kvwindow.Window, error) {
	cfg := windowConfig(w.cfg)
	cfg.Replicas, cfg.Provision = w.cfg.Replicas, w.cfg.Provision
	cfg.MaxTTL = longestTTL(w.sources, w.cfg.DefaultTTL)
	return openRetrying(ctx, w.log, &w.status, cfg.Bucket, cfg.Replicas, w.cfg.WindowPlacement, "dedupe window not reachable yet", "the dedupe window",
		func() (*kvwindow.Window, error) {
			missing, published := w.windowBefore(ctx, js, cfg)
			window, err := kvwindow.New(ctx, js, cfg)
			if err == nil {
				w.logCreatedBuckets(missing, published)
			}
			return window, err
		}, func(err error) bool { return errors.Is(err, kvwindow.ErrUnavailable) })
}

// openRetrying opens a window with open until it succeeds, retry (nil: always) refuses its error, or ctx ends,
// waiting with backoff in between; each wait is logged and is the start's step for /readyz. The cluster's refusal
// to place the bucket's replicas (of replicas, placed by placement: DEDUPE_WINDOW_PLACEMENT's value, or empty) is
// retried whatever retry says: it passes by itself while a server is offline or not yet known to the meta leader,
// and the warning names the settings that make it last. Once it has lasted jserr.PlacementStuckAfter, an error says so.
func openRetrying(ctx context.Context, log *slog.Logger, st *startStatus, bucket string, replicas int, placement, warn, what string,
	open func() (*kvwindow.Window, error), retry func(error) bool) (*kvwindow.Window, error) {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	var refusals jserr.Refusals
	for {
		window, err := open()
		refused := jserr.NoPlacement(err)
		if err == nil || (retry != nil && !retry(err) && !refused) || ctx.Err() != nil {
			return window, err
		}
		wait := bo.Next()
		lasted := refusals.Lasted(refused, time.Now(), jserr.PlacementStuckAfter)
		if refused {
			name := bucket
			if ce := (*kvwindow.CreateError)(nil); errors.As(err, &ce) {
				name = ce.Bucket // a shard's bucket
			}
			perr := &jserr.PlacementError{What: "bucket " + name, Replicas: replicas, Placement: placement, Err: err}
			err = perr
			log.Warn(err.Error(), "bucket", name, "in", wait)
			if lasted {
				log.Error(perr.Lasted(jserr.PlacementStuckAfter), "bucket", name, "setting", perr.Setting(), "err", err)
			}
		} else {
			log.Warn(warn+"; retrying", "bucket", bucket, "in", wait, "err", err)
		}
		st.wait("waiting for %s %s: %v", what, bucket, err)
		if backoff.Wait(ctx, wait) != nil {
			return nil, err
		}
	}
}

// windowBefore is what the server holds before the window is bound: the buckets of the window that do not exist
// (New creates them when provisioning is on), and how many events the output stream holds (0 when it does not
// exist or cannot be read). A lookup that fails otherwise counts the bucket as present: only what is known to be
// missing is said to be created.
func (w *worker) windowBefore(ctx context.Context, js jetstream.JetStream, cfg kvwindow.Config) (missing []string, published uint64) {
	if !cfg.Provision {
		return nil, 0
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for i := range cfg.Shards {
		bucket := kvwindow.ShardBucket(cfg.Bucket, cfg.Shards, i)
		if _, err := js.Stream(lctx, "KV_"+bucket); errors.Is(err, jetstream.ErrStreamNotFound) {
			missing = append(missing, bucket)
		}
	}
	if len(missing) > 0 {
		if st, err := js.Stream(lctx, w.cfg.OutputStream); err == nil {
			published = st.CachedInfo().State.Msgs
		}
	}
	return missing, published
}

// logCreatedBuckets says which window buckets the start created: at INFO on a first start, at WARN when the
// output stream already holds events, which a lost bucket's claims had suppressed the retries of. The worker goes
// on (OPERATIONS.md, "A lost window bucket"): refusing would stop deduplication altogether, and the claims cannot
// come back anyway; the warning says what it costs.
func (w *worker) logCreatedBuckets(missing []string, published uint64) {
	for _, bucket := range missing {
		if published > 0 {
			w.log.Warn(fmt.Sprintf("window bucket %s did not exist and was created empty, while stream %s holds %d events: "+
				"the claims of those events are gone, so a provider retry of any of them within its TTL is published again "+
				"as a new event (a deleted bucket, or a wrong DEDUPE_BUCKET or DEDUPE_NATS_URL?)", bucket, w.cfg.OutputStream, published),
				"bucket", bucket, "stream", w.cfg.OutputStream, "events", published)
			continue
		}
		w.log.Info("created window bucket", "bucket", bucket, "replicas", w.cfg.Replicas)
	}
}

// pipelineShutdownBudget is the part of DEDUPE_SHUTDOWN_TIMEOUT the pipeline may spend finishing in-flight
// envelopes; the rest is kept for draining the connection and stopping the servers, so that the whole shutdown
// stays within the one setting (and within a Kubernetes grace period a few seconds longer).
func pipelineShutdownBudget(total time.Duration) time.Duration {
	rest := min(5*time.Second, total/4)
	return total - rest
}

// serveHTTP starts /metrics, /healthz and /readyz, before the worker connects. Listening happens here, so a busy
// port fails the start.
func (w *worker) serveHTTP(reg *prometheus.Registry) error {
	if w.cfg.HTTPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", w.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http: %w", listenError("DEDUPE_HTTP_ADDR", w.cfg.HTTPAddr, "run", err))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { writePlain(rw, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := w.status.check(ctx); err != nil {
			writePlain(rw, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		writePlain(rw, http.StatusOK, "ready")
	})
	if w.cfg.Pprof {
		for name, h := range map[string]http.HandlerFunc{"": pprof.Index, "cmdline": pprof.Cmdline, "profile": pprof.Profile,
			"symbol": pprof.Symbol, "trace": pprof.Trace} {
			mux.HandleFunc("GET /debug/pprof/"+name, h)
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	w.httpSrv, w.httpDone = srv, done
	// The goroutine serves this server, not w.httpSrv: a start that fails at once shuts down (and clears the
	// field) before the goroutine may have run; Serve then returns ErrServerClosed and closes ln.
	go func() { done <- srv.Serve(ln) }()
	w.log.Info("serving metrics and health", "addr", ln.Addr().String())
	return nil
}

// shutdown stops, in order: the HTTP server, the window (the pipeline, which claimed through it, has returned
// within pipelineShutdownBudget), the NATS connection (draining publishes and acks), the embedded server, within
// what is left of DEDUPE_SHUTDOWN_TIMEOUT. Calling it again does nothing.
func (w *worker) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout-pipelineShutdownBudget(w.cfg.ShutdownTimeout))
	defer cancel()
	var errs []error
	wrap := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s%w", what, err))
		}
	}
	if w.httpSrv != nil {
		wrap("http shutdown: ", w.httpSrv.Shutdown(ctx))
		// Serve returns once Shutdown closed its listener: the serving goroutine ends here, not after run.
		if err := <-w.httpDone; !errors.Is(err, http.ErrServerClosed) {
			wrap("http: ", err)
		}
		w.httpSrv, w.httpDone = nil, nil
	}
	if w.window != nil {
		wrap("dedupe window close: ", w.window.Close())
		w.window = nil
	}
	if w.nc != nil {
		left, _ := ctx.Deadline()
		wrap("", drainNATS(w.nc, time.Until(left)))
		w.nc = nil
	}
	if w.srv != nil {
		wrap("", w.srv.Shutdown(ctx))
		w.srv = nil
	}
	if len(errs) == 0 {
		w.log.Info("stopped")
	}
	return errors.Join(errs...)
}

// windowConfig is the window of the settings (bucket, shards, placement), as every command binds to it; commands
// other than run never provision.
func windowConfig(c config.Config) kvwindow.Config {
	placement, _ := config.ParsePlacement(c.WindowPlacement) // checked by config.Validate
	return kvwindow.Config{Bucket: c.Bucket, Shards: c.WindowShards, Placement: placement}
}

// pipelineConfig is the pipeline of the settings, as the worker runs it and as its boot line says what is in force
// (inForce); the start adds what it makes (JetStream, Window, Sources, Logger, Metrics).
func pipelineConfig(cfg config.Config) pipeline.Config {
	return pipeline.Config{
		Extractor:             keys.Extractor{MaxJSONBytes: cfg.MaxJSONBytes},
		DefaultTTL:            cfg.DefaultTTL,
		InputStream:           cfg.InputStream,
		InputPrefix:           cfg.InputPrefix,
		OutputStream:          cfg.OutputStream,
		OutputPrefix:          cfg.OutputPrefix,
		DLQStream:             cfg.DLQStream,
		DLQPrefix:             cfg.DLQPrefix,
		DuplicatesPrefix:      cfg.DuplicatesPrefix,
		Consumer:              cfg.Consumer,
		Provision:             cfg.Provision,
		Replicas:              cfg.Replicas,
		MaxInFlight:           cfg.MaxInFlight,
		AckWait:               cfg.AckWait,
		ConsumerStart:         cfg.ConsumerStart,
		OutputMaxAge:          cfg.OutputMaxAge,
		OutputDuplicates:      cfg.OutputDuplicateWindow,
		DLQMaxAge:             cfg.DLQMaxAge,
		MaxHold:               cfg.MaxHold,
		MaxAckPending:         cfg.MaxAckPending,
		ForwardWhenWindowDown: cfg.ForwardWhenWindowDown,
		ShutdownTimeout:       pipelineShutdownBudget(cfg.ShutdownTimeout),
	}
}

// longestTTL is the longest claim TTL the worker writes: the longest dedupe TTL of the sources that dedupe, def
// (DEDUPE_DEFAULT_TTL) for those that set none; 0 when none dedupes. The window's buckets must hold a claim that
// long (kvwindow.Config.MaxTTL).
func longestTTL(sources keys.Sources, def time.Duration) time.Duration {
	var ttl time.Duration
	for id, spec := range sources.Specs {
		if !slices.Contains(sources.WithoutDedupe, id) {
			ttl = max(ttl, spec.TTL(def))
		}
	}
	return ttl
}
