package receiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// readyFor is how long /readyz answers from its last lookup (Ready): a probe every second from each of several
// kubelets and load balancers would otherwise cost a JetStream API request each.
const readyFor = time.Second

// readiness is /readyz's last lookup.
type readiness struct {
	mu  sync.Mutex // held during a lookup: concurrent probes wait for it rather than make their own
	at  time.Time  // zero: never looked up
	err error
}

// Ready reports whether deliveries can be stored: the input stream can be looked up (NATS is connected, JetStream
// answers, the stream exists), the replay guard's window answers and is the bucket it bound to when a source is
// guarded (every delivery of a guarded source is answered 503 otherwise; a bucket deleted under the receiver
// stays so until it is restarted), and Serve is not shutting down. Each call looks them up; /readyz answers from a
// lookup at most a second old.
func (r *Receiver) Ready(ctx context.Context) error {
	if r.closing.Load() {
		return errors.New("receiver: shutting down")
	}
	if _, err := r.cfg.JetStream.Stream(ctx, r.cfg.InputStream); err != nil {
		return fmt.Errorf("receiver: input stream %s: %w", r.cfg.InputStream, err)
	}
	if r.guarding {
		if err := r.cfg.Window.Ping(ctx); err != nil {
			return fmt.Errorf("receiver: the replay guard's bucket %s: %w", r.cfg.Window.Bucket(), err)
		}
	}
	return nil
}

// readyCached is Ready, answered from the last lookup when it is less than readyFor old (shutting down is
// reported at once).
func (r *Receiver) readyCached(ctx context.Context) error {
	if r.closing.Load() {
		return errors.New("receiver: shutting down")
	}
	rd := &r.ready
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if !rd.at.IsZero() && time.Since(rd.at) < readyFor {
		return rd.err
	}
	// Not the probe's own context: a probe that goes away must not leave its cancellation as the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	rd.err, rd.at = r.Ready(ctx), time.Now()
	return rd.err
}
