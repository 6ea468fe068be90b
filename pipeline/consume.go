package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
)

var errConnClosed = errors.New("pipeline: NATS connection closed")

// consume binds the consumer and keeps a pull subscription on it until ctx is done. The subscription pulls again
// after a reconnect, a leader change or missed heartbeats by itself; when it ends (consumer deleted, connection
// closed) it is bound again. It never creates the consumer again (that would replay the stream) unless Provision
// is set and the stream keeps no processed envelopes: a deleted consumer otherwise leaves the pipeline unready
// until an operator restores it.
func (p *Pipeline) consume(ctx context.Context, rs *runState) error {
	nc := p.nc
	handler := func(d *delivery) {
		select {
		case rs.work <- d:
		case <-rs.stopping:
			_ = p.nakMsg(d, 0)
			p.nakShutdown.Inc()
		}
	}
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if nc.IsClosed() {
			return errConnClosed
		}
		p.pulls.restart(p.clock()) // readiness counts the pulls' silence from this binding on
		sub, err := p.bind(ctx, handler)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if p.cfg.Provision && (errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
				// Deleted by an operator (or with its stream): create what is missing again. Provision refuses to
				// create a consumer that would replay processed envelopes (ErrConsumerStart).
				if perr := Provision(ctx, p.js, p.cfg); perr != nil {
					err = perr
				} else {
					continue
				}
			}
			if ok, _ := p.bindLog.allow(); ok {
				p.log.Warn("pipeline: cannot consume; retrying", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "err", err)
			}
			if !bo.Sleep(ctx) {
				return nil
			}
			continue
		}
		bo.Reset()
		p.setBound(true)
		p.log.Info("pipeline: consuming", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "max_in_flight", p.cfg.MaxInFlight)
	watch:
		for {
			select {
			case <-ctx.Done():
				rs.stop()
				sub.drain(min(5*time.Second, p.cfg.ShutdownTimeout)) // buffered envelopes go through the handler, which hands them back
				p.setBound(false)
				return nil
			case <-sub.closed:
				p.setBound(false)
				if nc.IsClosed() {
					return errConnClosed
				}
				p.log.Warn("pipeline: pull subscription ended; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
				break watch
			case err := <-sub.failed:
				sub.stop()
				p.setBound(false)
				p.log.Warn("pipeline: consuming stopped; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "err", err)
				break watch
			case <-tick.C:
				if nc.IsClosed() {
					sub.stop()
					p.setBound(false)
					return errConnClosed
				}
				if p.rebind.Swap(false) {
					// Another consumer under the name, or the process was paused: drop what the client buffered
					// (it is redelivered after the ack wait) and bind again.
					sub.stop()
					p.setBound(false)
					p.log.Warn("pipeline: binding the consumer again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
					bo.Reset()
					break watch
				}
			}
		}
		if !bo.Sleep(ctx) {
			return nil
		}
	}
}

func (p *Pipeline) bind(ctx context.Context, handler func(*delivery)) (*pullSub, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	info := c.CachedInfo()
	p.consumerCreated.Store(info.Created.UnixNano())
	p.rebind.Store(false)
	sub, err := p.newPullSub(handler, limitsOf(info.Config))
	if err == nil {
		p.pullSub.Store(sub)
	}
	return sub, err
}

// pullTimes are the consume loop's pull expiry and heartbeat: short against the ack wait (and so against the output
// stream's duplicate window), so that a pull request left open by a replica that stopped answering (paused, cut
// off) stops taking deliveries soon.
func pullTimes(ackWait time.Duration) (expiry, heartbeat time.Duration) {
	expiry = min(15*time.Second, max(time.Second, ackWait/2))
	heartbeat = max(500*time.Millisecond, expiry/4)
	return expiry, heartbeat
}
