package receiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// readyFor is how long /readyz answers from its last lookup (Ready): a probe every second from each of several
// kubelets and load balancers would otherwise cost a JetStream API request each.
const readyFor = time.Second

// readiness is /readyz's last lookup.
type readiness struct {
	mu    sync.Mutex // held during a lookup: concurrent probes wait for it rather than make their own
	at    time.Time  // zero: never looked up
	err   error
	guard error // the replay guard's failure, when it did not fail readiness (guardReadiness)
}

// guardReadiness decides what the replay guard's failure (nil when its window answers) does to readiness, for a
// receiver serving served sources of which guarded are guarded: unready only when every source served is guarded.
// Otherwise failing readiness would take every ingest replica out of its load balancer at once (the guard's bucket
// is shared), and the unguarded sources down with the guarded ones; the guard's state is then
// dedupeworker_ingest_replay_guard_up and a log line at each change.
func guardReadiness(served, guarded int, guard error) error {
	if guarded > 0 && guarded >= served {
		return guard
	}
	return nil
}

// notConnected says that the connection to NATS is down, when the JetStream has one (jetstream.JetStream has) and
// it is; "" otherwise. Ready and the log line of a failed publish say so first: a request while disconnected fails
// at once with the client's "outbound buffer limit exceeded" (no reconnect buffer), which names no cause a person
// would look for.
func (r *Receiver) notConnected() string {
	if c, ok := r.cfg.JetStream.(interface{ Conn() *nats.Conn }); ok && !c.Conn().IsConnected() {
		return "not connected to NATS (" + c.Conn().Status().String() + ")"
	}
	return ""
}

// Ready reports whether deliveries can be stored: Serve is not shutting down, the connection to NATS is up, the
// input stream can be looked up and, when every source served is guarded, the replay guard's window answers and is
// the bucket it bound to. Each call looks them up; /readyz answers from a lookup at most a second old.
func (r *Receiver) Ready(ctx context.Context) error {
	err, _ := r.lookup(ctx)
	return err
}

// lookup is Ready, with the replay guard's failure when it does not fail readiness.
func (r *Receiver) lookup(ctx context.Context) (err, guard error) {
	if r.closing.Load() {
		return errors.New("receiver: shutting down"), nil
	}
	if nc := r.notConnected(); nc != "" {
		return errors.New("receiver: " + nc + ": the server is down or out of reach; " +
			"deliveries are answered 503 until ingest reconnects by itself"), nil
	}
	if _, err := r.cfg.JetStream.Stream(ctx, r.cfg.InputStream); err != nil {
		return fmt.Errorf("receiver: input stream %s: %w", r.cfg.InputStream, err), nil
	}
	if !r.guarding {
		return nil, nil
	}
	guard = r.pingGuard(ctx)
	if err := guardReadiness(r.served, len(r.guarded), guard); err != nil {
		return err, nil
	}
	return nil, guard
}

// pingGuard checks the replay guard's window, sets dedupeworker_ingest_replay_guard_up and logs the state when it
// changed.
func (r *Receiver) pingGuard(ctx context.Context) error {
	bucket := r.cfg.Window.Bucket()
	err := r.cfg.Window.Ping(ctx)
	if err != nil {
		err = fmt.Errorf("receiver: the replay guard's bucket %s: %w", bucket, err)
	}
	up, gauge := err == nil, 0.0
	if up {
		gauge = 1
	}
	r.metrics.guardUp.WithLabelValues(bucket).Set(gauge)
	if r.guardUp.Swap(up) == up {
		return err
	}
	if up {
		r.log.Info("replay guard up: its bucket answers again; guarded sources are served", "bucket", bucket, "sources", r.guarded)
		return nil
	}
	attrs := []any{"bucket", bucket, "sources", r.guarded, "err", err}
	if guardReadiness(r.served, len(r.guarded), err) != nil {
		attrs = append(attrs, "ready", false)
	} else {
		attrs = append(attrs, "ready", true, "why_ready", "unguarded sources are still stored")
	}
	if errors.Is(err, kvwindow.ErrWindowLost) {
		attrs = append(attrs, "fix", "the bucket's claims are gone and it stays refused until ingest is restarted: decide about the lost claims, then restart ingest (OPERATIONS.md, \"The window bucket was lost or re-created\")")
	}
	r.log.Error("replay guard down: deliveries of guarded sources are answered 503", attrs...)
	return err
}

// readyCached is lookup, answered from the last one when it is less than readyFor old (shutting down is reported
// at once).
func (r *Receiver) readyCached(ctx context.Context) (err, guard error) {
	if r.closing.Load() {
		return errors.New("receiver: shutting down"), nil
	}
	rd := &r.ready
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.at.IsZero() || time.Since(rd.at) >= readyFor {
		// Not the probe's own context: a probe that goes away must not leave its cancellation as the answer.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		rd.err, rd.guard = r.lookup(ctx)
		rd.at = time.Now()
	}
	return rd.err, rd.guard
}
