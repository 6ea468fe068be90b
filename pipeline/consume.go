package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var errConnClosed = errors.New("pipeline: NATS connection closed")

// consume binds the consumer and keeps a Consume loop alive until ctx is done. The client library re-pulls after a
// reconnect or missed heartbeats by itself; when the loop stops (consumer deleted, connection closed) it is
// re-created. It never creates the consumer again (that would replay the stream): a deleted consumer leaves the
// pipeline unready until an operator restores it or restarts with Provision.
func (p *Pipeline) consume(ctx context.Context, rs *runState) error {
	nc := p.js.Conn()
	handler := func(m jetstream.Msg) {
		select {
		case rs.work <- delivery{m, p.clock()}:
		case <-rs.stopping:
			_ = m.Nak()
			p.nakShutdown.Inc()
		}
	}
	errHandler := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		switch {
		case errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
			errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrServerShutdown):
			p.log.Debug("pipeline: consume", "err", err)
		default:
			p.log.Warn("pipeline: consume", "err", err)
		}
	})
	expiry, heartbeat := pullTimes(p.cfg.AckWait)
	opts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(p.cfg.MaxInFlight),
		jetstream.PullExpiry(expiry),
		jetstream.PullHeartbeat(heartbeat),
		errHandler,
	}
	bo := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if nc.IsClosed() {
			return errConnClosed
		}
		cc, err := p.bind(ctx, handler, opts)
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
			if !bo.sleep(ctx) {
				return nil
			}
			continue
		}
		bo.reset()
		p.setBound(true)
		p.log.Info("pipeline: consuming", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "max_in_flight", p.cfg.MaxInFlight)
		closed := cc.Closed()
	watch:
		for {
			select {
			case <-ctx.Done():
				rs.stop()
				cc.Drain() // buffered envelopes go through the handler, which hands them back
				t := time.NewTimer(min(5*time.Second, p.cfg.ShutdownTimeout))
				select {
				case <-closed:
				case <-t.C:
					cc.Stop()
				}
				t.Stop()
				p.setBound(false)
				return nil
			case <-closed:
				p.setBound(false)
				p.log.Warn("pipeline: consume loop stopped; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
				break watch
			case <-tick.C:
				if nc.IsClosed() {
					cc.Stop()
					p.setBound(false)
					return errConnClosed
				}
				if p.rebind.Swap(false) {
					// Another consumer under the name, or the process was paused: drop what the client buffered
					// (it is redelivered after the ack wait) and bind again.
					cc.Stop()
					p.setBound(false)
					p.log.Warn("pipeline: binding the consumer again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
					bo.reset()
					break watch
				}
			}
		}
		if !bo.sleep(ctx) {
			return nil
		}
	}
}

func (p *Pipeline) bind(ctx context.Context, handler jetstream.MessageHandler, opts []jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	p.consumerCreated.Store(c.CachedInfo().Created.UnixNano())
	p.rebind.Store(false)
	return c.Consume(handler, opts...)
}

// pullTimes are the consume loop's pull expiry and heartbeat: short against the ack wait (and so against the output
// stream's duplicate window), so that a pull request left open by a replica that stopped answering (paused, cut
// off) stops taking deliveries soon.
func pullTimes(ackWait time.Duration) (expiry, heartbeat time.Duration) {
	expiry = min(15*time.Second, max(time.Second, ackWait/2))
	heartbeat = max(500*time.Millisecond, expiry/4)
	return expiry, heartbeat
}
