// Package embedded runs an in-process NATS server with JetStream, so that dedupeworker works on a fresh machine
// with no NATS of its own. It is a convenience for laptops and demos: production runs against an external,
// replicated NATS cluster.
package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config says where the embedded server listens and keeps its JetStream store.
type Config struct {
	// Listen is host:port for client connections ("127.0.0.1:4222"); port 0 picks a free port.
	Listen string
	// StoreDir is the JetStream store directory; it is created when missing.
	StoreDir string
	// ReadyTimeout bounds how long Start waits for the server to accept connections; 0 waits as long as Start's
	// context lives. The server recovers every stream before it opens its client port: seconds per million window
	// keys (docs/scale.md), so no fixed bound suits every store. Either way a Start given up returns only once the
	// server has stopped (Start says why).
	ReadyTimeout time.Duration
	// Logger receives the server's own log lines; nil discards them.
	Logger *slog.Logger
	// MaxPayload is the server's max_payload: the largest message, headers and body, it accepts, in bytes. 0 means
	// DefaultMaxPayload. The worker passes MaxPayloadFor(DEDUPE_MAX_JSON_BYTES).
	MaxPayload int
}

// DefaultMaxPayload is the embedded server's max_payload when Config.MaxPayload is 0: 8 MiB, the largest a
// nats-server takes without warning, instead of the server's own default of 1 MiB.
const DefaultMaxPayload = 8 << 20

// headerRoom is what MaxPayloadFor keeps for headers: the largest header block the worker publishes.
const headerRoom = 64 << 10

// MaxPayloadFor is the max_payload that lets bodies well over maxBody through, with room for their headers:
// max(DefaultMaxPayload, 2 x maxBody + 64 KiB), at most 2 GiB - 1. The worker reads at most maxBody bytes of a body
// (DEDUPE_MAX_JSON_BYTES) and forwards a larger one unkeyed ("too-large"); with the server's default of 1 MiB and
// the default DEDUPE_MAX_JSON_BYTES of 1 MiB, such a body could never be published at all.
func MaxPayloadFor(maxBody int) int {
	if maxBody > (math.MaxInt32-headerRoom)/2 {
		return math.MaxInt32
	}
	return max(DefaultMaxPayload, 2*maxBody+headerRoom)
}

// Server is a running embedded NATS server.
type Server struct {
	ns   *server.Server
	lock *storeLock
}

// Start validates cfg, locks the store directory (ErrStoreInUse when another server holds it), starts the server
// and waits until it accepts connections, or until ctx ends or cfg.ReadyTimeout passes; then it stops the server
// before it unlocks the store. A server cannot be stopped halfway through its start: one that is still recovering
// its streams when ctx ends is stopped once it has recovered them.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded: listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedded: listen address %q: invalid port", cfg.Listen)
	}
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded: store directory: must not be empty")
	}
	cfg.MaxPayload = cmp.Or(cfg.MaxPayload, DefaultMaxPayload)
	if cfg.MaxPayload < 0 || cfg.MaxPayload > math.MaxInt32 {
		return nil, fmt.Errorf("embedded: max payload: must be between 1 and %d bytes, got %d", math.MaxInt32, cfg.MaxPayload)
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded: store directory: %w", err)
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	srv, err := startServer(ctx, cfg, host, port)
	if err != nil {
		lock.release()
		return nil, err
	}
	srv.lock = lock
	lock.record(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	return srv, nil
}

// startServer starts the server of a validated cfg whose store directory is locked.
func startServer(ctx context.Context, cfg Config, host string, port int) (*Server, error) {
	if port != 0 {
		// The server only logs a busy port and then never becomes ready; probing first turns that into an error
		// a person can act on.
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded: cannot listen on %s (is another NATS server running? set DEDUPE_NATS_URL "+
				"to use it, or DEDUPE_EMBEDDED_LISTEN to pick another address): %w", cfg.Listen, err)
		}
		_ = ln.Close()
	}
	opts := &server.Options{
		ServerName: "dedupeworker-embedded",
		Host:       host,
		Port:       cmp.Or(port, server.RANDOM_PORT), // 0: a free port, which ClientURL reports
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		MaxPayload: int32(cfg.MaxPayload),
		// The server refuses a max_payload above the outbound buffer of a client (64 MiB by default).
		MaxPending: max(server.MAX_PENDING_SIZE, int64(cfg.MaxPayload)),
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	log := slogAdapter{l: cfg.Logger.With("component", "nats-server"), fatal: new(atomic.Pointer[string])}
	ns.SetLoggerV2(log, false, false, false)
	started := make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(started)
		ns.Start()
	}()
	if err := waitReady(ctx, ns, cfg, begin, log.fatal); err != nil {
		// The server's Start carries on after a Shutdown that comes first: it enables JetStream in the store (and
		// recovers it) with nothing left to stop it. So the server is stopped once its Start has returned, and
		// the store stays locked until the server has let go of it.
		awaitStart(started, cfg.Logger, cfg.StoreDir, ctx.Err() != nil, begin, time.Second, 10*time.Second)
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded: server on %s (store %s): %w", cfg.Listen, cfg.StoreDir, err)
	}
	return &Server{ns: ns}, nil
}

// waitReady waits until ns accepts connections, or ctx ends, or cfg.ReadyTimeout passes, or the server reports a
// fatal error (it then never opens its client port), saying every 10 s that the server is still recovering its
// streams.
func waitReady(ctx context.Context, ns *server.Server, cfg Config, start time.Time, fatal *atomic.Pointer[string]) error {
	for next := 10 * time.Second; ; {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped before it was ready: %w", context.Cause(ctx))
		}
		if ns.ReadyForConnections(250 * time.Millisecond) {
			return nil
		}
		if f := fatal.Load(); f != nil {
			return fmt.Errorf("the server failed to start: %s", *f)
		}
		waited := time.Since(start)
		switch {
		case cfg.ReadyTimeout > 0 && waited >= cfg.ReadyTimeout:
			return fmt.Errorf("not ready after %s", cfg.ReadyTimeout)
		case waited >= next:
			cfg.Logger.Info("embedded NATS server still recovering its streams", "waited", waited.Round(time.Second),
				"store", cfg.StoreDir)
			next += 10 * time.Second
		}
	}
}

// awaitStart waits for a server that is being given up to return from its own start (started closed), which lasts
// until it has recovered every stream of the store: minutes for a large one. A start still running after grace is
// said once, with how a stopped process can exit at once (stopped: its context ended, as a signal ends the worker's),
// and then every interval, as waitReady says it, so that a stop that seems to hang says why.
func awaitStart(started <-chan struct{}, log *slog.Logger, store string, stopped bool, begin time.Time, grace, interval time.Duration) {
	wait := time.NewTimer(grace)
	defer wait.Stop()
	select {
	case <-started:
		return
	case <-wait.C:
	}
	msg := "embedded NATS server stops once it has recovered its streams (it cannot stop halfway through its start)"
	if stopped {
		msg += "; a second signal (Ctrl-C) exits now, as a crash: the next start rebuilds the store"
	}
	log.Info(msg, "waited", time.Since(begin).Round(time.Second), "store", store)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-started:
			return
		case <-tick.C:
			log.Info("embedded NATS server still recovering its streams", "waited", time.Since(begin).Round(time.Second),
				"store", store)
		}
	}
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Shutdown stops the server and waits for it to finish, or for ctx to end. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		s.lock.release()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("embedded: shutdown: %w", ctx.Err())
	}
}

// slogAdapter routes nats-server's log lines into slog, and keeps the first fatal one for Start. The server's
// notices are chatty at startup, so they go to debug; warnings and errors keep their level.
type slogAdapter struct {
	l     *slog.Logger
	fatal *atomic.Pointer[string]
}

func (a slogAdapter) Noticef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Fatalf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	a.fatal.CompareAndSwap(nil, &msg)
	a.l.Error(msg)
}
func (a slogAdapter) Errorf(f string, v ...any) { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Debugf(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Tracef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
