package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/keys"
)

// roleStart is what each long-running role (run, ingest) reads before it starts, in the same order and with the
// same exit statuses (flags, settings, logger, where to connect, the sources document), and where its start stands.
type roleStart struct {
	cfg          config.Config
	log          *slog.Logger
	natsCfg      natsconn.Config
	embeddedNATS bool   // no NATS server configured anywhere, or run --embedded
	natsFromCLI  string // where the server URL came from when that is the nats CLI's configuration (NATS_URL, a context)
	sources      keys.Sources
	fromPresets  bool
	status       startStatus // /readyz while the role starts: the step it waits for, then (run) the pipeline's readiness
}

// startRole parses the role's flags (the connection flags and nothing else) and reads its settings and sources.
// A bad flag, setting or sources document is a usage error (exit 2).
func startRole(name, usage string, args []string, stderr io.Writer) (*roleStart, error) {
	fs := newFlagSet(name, usage)
	conn := addConnFlags(fs)
	if name == "run" {
		fs.BoolVar(&conn.embedded, "embedded", false, "start the embedded JetStream server, whatever NATS_URL or a nats CLI context say (make run passes it)")
	}
	fs.Usage = func() {
		w := fs.Output() // standard output when help was asked for
		fmt.Fprint(w, usage)
		_ = config.RoleUsage(w, name)
		fmt.Fprint(w, "\nFlags (the connection flags go over the settings above, NATS_* variables and nats CLI contexts):\n")
		printFlags(w, fs)
	}
	if err := parseFlagsOnly(fs, args); err != nil {
		return nil, err
	}
	cfg, log, err := loadSettings(stderr)
	if err != nil {
		return nil, err
	}
	rs := &roleStart{cfg: cfg, log: log}
	if rs.natsCfg, rs.embeddedNATS, err = conn.resolve(cfg); err != nil {
		return nil, err
	}
	rs.natsFromCLI = conn.cliURL
	// ingest verifies deliveries by the verify blocks; the worker reads the same document and ignores them.
	if rs.sources, rs.fromPresets, err = loadSources(cfg, name == "ingest"); err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return rs, nil
}

// logStart writes a role's first lines: its boot line (msg, with startAttrs) and, when every preset became a source,
// a line saying so (what became of them, with attrs): at INFO with no sources document (the quickstart), at WARN
// when one declares no source (an empty ConfigMap), where the operator most likely meant a list of their own.
func (rs *roleStart) logStart(msg, role, what string, attrs ...any) {
	rs.log.Info(msg, startAttrs(rs.log, rs.cfg, role)...)
	if !rs.fromPresets {
		return
	}
	if o, ok := configuredSources(rs.cfg); ok {
		rs.log.Warn(o.String()+" declares no source: "+what+", as with no sources document at all", attrs...)
	} else {
		rs.log.Info("no sources configured: "+what, attrs...)
	}
}

// newRoleRegistry is the registry of a long-running role (run, ingest): the Go runtime, the process and the
// build. It exists before the role connects, so that /metrics answers from the start.
func newRoleRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(readBuildInfo()))
	return reg
}

// connect connects a long-running role as name and probes JetStream (probeJetStream, whose other errors are
// probe), recording each step for /readyz; connected runs once connected. nc is returned whenever made, for the
// caller to drain.
func (rs *roleStart) connect(ctx context.Context, c natsconn.Config, name string, connected func(*nats.Conn)) (nc *nats.Conn,
	js jetstream.JetStream, probe, err error) {
	log, st := rs.log, &rs.status
	// A service, started together with NATS (or with the worker and its embedded server): both roles wait as long.
	c.Name, c.Logger, c.RetryFor = name, log, rs.cfg.ConnectRetry(config.DefaultRunConnectTimeout)
	st.wait("connecting to NATS at %s", natsconn.Redact(c.URL))
	if nc, err = natsconn.ConnectContext(ctx, c); err != nil {
		return nil, nil, nil, failErr(err)
	}
	server := natsconn.Redact(nc.ConnectedUrlRedacted())
	log.Info("connected to NATS", "server", server, "from", c.Origin)
	if js, err = jetstream.New(nc); err != nil {
		return nc, nil, nil, failErr(fmt.Errorf("jetstream: %w", err))
	}
	if connected != nil {
		connected(nc)
	}
	st.wait("asking JetStream at %s", server)
	probe = probeJetStream(ctx, js, rs.cfg.InputStream, server, min(jetStreamGrace, c.RetryFor), log, st)
	if errors.Is(probe, errJetStreamOff) {
		return nc, nil, nil, failErr(probe)
	}
	return nc, js, probe, nil
}
