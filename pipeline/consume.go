package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

var errConnClosed = errors.New("pipeline: NATS connection closed")

// consume binds the consumer and keeps a pull subscription on it until ctx is done, binding again when it ends or
// the status poll finds the consumer deleted or created again. A consumer checkConsumer refuses is not bound, and
// readiness says why. With Provision, a consumer or stream found missing is created again (decideStart); without
// it, a deleted consumer leaves the pipeline unready until an operator restores it.
func (p *Pipeline) consume(ctx context.Context, rs *runState) error {
	nc := p.nc
	handler := func(d *delivery) {
		if !rs.handOver(d) {
			_ = p.nakMsg(d, 0)
			p.naks[protocol.NakShutdown].Inc()
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
			if p.cfg.Provision && consumerGone(err) {
				// Deleted by an operator (or with its stream): create what is missing again (or ErrConsumerStart).
				if perr := p.reprovision(ctx); perr != nil {
					err = perr
				} else {
					continue
				}
			}
			p.bindFailed(err)
			if ok, _ := p.bindLog.allow(); ok {
				p.log.Warn("pipeline: cannot consume; retrying", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "err", err)
			}
			if !bo.Sleep(ctx) {
				return nil
			}
			continue
		}
		bo.Reset()
		p.bindErr.Store(nil)
		p.setBound(true)
		p.log.Info("pipeline: consuming", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "max_in_flight", p.cfg.MaxInFlight)
		// unbind ends the subscription (a closed one too) and readiness follows, before the line that says why.
		unbind := func() { sub.stop(); p.setBound(false) }
	watch:
		for {
			select {
			case <-ctx.Done():
				// Buffered envelopes go through the handler, which hands them back, within the shutdown's budget.
				sub.drain(time.Until(rs.until(rs.steps.drain)))
				p.setBound(false)
				return nil
			case <-sub.closed:
				unbind()
				if nc.IsClosed() {
					return errConnClosed
				}
				p.log.Warn("pipeline: pull subscription ended; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
				break watch
			case err := <-sub.failed:
				unbind()
				p.log.Warn("pipeline: consuming stopped; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "err", err)
				break watch
			case <-tick.C:
				if nc.IsClosed() {
					unbind()
					return errConnClosed
				}
				if p.cfg.Provision && p.missing.Swap(false) {
					// A publish found its stream missing (deleted under the worker): create it again.
					if err := p.recreateStreams(ctx); err != nil && ctx.Err() == nil {
						if ok, _ := p.provisionLog.allow(); ok {
							p.log.Warn("pipeline: cannot create the missing streams again; retrying on the next failed publish", "err", err)
						}
					}
				}
				if p.rebind.Swap(false) {
					// Another consumer under the name, or none, or the process was paused: drop what the client buffered.
					unbind()
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
	// An operator may have created the consumer again under the running worker: Provision's checks, warnings once.
	warns, err := checkConsumer(p.cfg, info.Config)
	if err != nil {
		return nil, err
	}
	created := info.Created.UnixNano()
	keys := warningKeys(warns)
	prev := p.seenConsumer.Swap(&seenConsumer{created: created, warns: keys})
	logConsumerWarnings(p.cfg, warningsToLog(prev, created, warns, keys))
	p.consumerCreated.Store(created)
	p.rebind.Store(false)
	sub, err := p.newPullSub(handler, limitsOf(info.Config))
	if err == nil {
		p.pullSub.Store(sub)
	}
	return sub, err
}

func (p *Pipeline) bindFailed(err error) {
	if p.offline(err) {
		err = errors.New("not connected to NATS")
	}
	p.bindErr.Store(&err)
	p.updateReady()
}

// reprovision creates again what is missing under the running worker (Provision, never from ConsumerStart).
func (p *Pipeline) reprovision(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := provision(cctx, p.cfg, true)
	if err == nil {
		p.seenConsumer.Store(&seenConsumer{created: got.consumer.UnixNano()}) // its warnings are logged
		p.outputCreated(got.output)
	}
	return err
}

// recreateStreams creates again the streams that are missing under the running worker (the consumer is bound).
func (p *Pipeline) recreateStreams(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, output, err := ensureStreams(cctx, p.js, p.cfg)
	if err == nil {
		// A DEDUPED created just now has forgotten the Nats-Msg-Ids of the one deleted: takeovers judge by its
		// creation at once, not at the next status poll.
		p.outputCreated(output.Created)
	}
	return err
}

// consumerGone reports whether a read of the consumer says that it, or its stream, does not exist.
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// streamMissing asks the consume loop to provision again when a publish's failure says its stream is missing.
func (p *Pipeline) streamMissing(err error) {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
		p.missing.Store(true)
	}
}

// pullTimes are the pull expiry and heartbeat: short against the ack wait, so that a pull request left open by a
// replica that stopped answering (paused, cut off) stops taking deliveries soon.
func pullTimes(ackWait time.Duration) (expiry, heartbeat time.Duration) {
	expiry = min(15*time.Second, max(time.Second, ackWait/2))
	heartbeat = max(500*time.Millisecond, expiry/4)
	return expiry, heartbeat
}

// seenConsumer is the consumer whose warnings were logged last, and what they were when its configuration was
// last read.
type seenConsumer struct {
	created int64    // its creation time (unix ns)
	warns   []string // warningKeys of its warnings; nil: logged by provisioning, not read by a bind since
}

// consumerEdited logs the warnings that an operator's edit of the bound consumer in place (nats consumer edit: a
// delivery limit, another ack wait) added since its configuration was last read: the bind logs a consumer's
// warnings once, when it is first seen, and an edit keeps its creation time. warns are checkConsumer's as read now.
func (p *Pipeline) consumerEdited(created int64, warns []consumerWarning) {
	prev := p.seenConsumer.Load()
	if prev == nil || prev.created != created || prev.warns == nil {
		return // not the consumer bound (a rebind follows), or not read by a bind yet: the bind logs its warnings
	}
	keys := warningKeys(warns)
	if !p.seenConsumer.CompareAndSwap(prev, &seenConsumer{created: created, warns: keys}) {
		return // a bind read it meanwhile: the next poll compares with what it stored
	}
	logConsumerWarnings(p.cfg, warningsToLog(prev, created, warns, keys))
}

// warningsToLog decides which warnings of a consumer read now (warns, keys their warningKeys) are news against
// what was recorded of it (prev): every one for a consumer new to this process (nothing recorded, or another
// creation time); none when provisioning logged them and nothing has read it since (prev.warns nil); else those
// added since it was last read, as an edit in place keeps the creation time. The bind asks it too, so that an edit
// followed by a rebind before the next status poll is still warned about.
func warningsToLog(prev *seenConsumer, created int64, warns []consumerWarning, keys []string) []consumerWarning {
	switch {
	case prev == nil || prev.created != created:
		return warns
	case prev.warns == nil:
		return nil
	}
	var added []consumerWarning
	for i, w := range warns {
		if !slices.Contains(prev.warns, keys[i]) {
			added = append(added, w)
		}
	}
	return added
}

// warningKeys identifies each warning by its text and values: a limit edited to another value is a new warning.
func warningKeys(warns []consumerWarning) []string {
	keys := make([]string, len(warns))
	for i, w := range warns {
		keys[i] = w.msg + fmt.Sprint(w.args...)
	}
	return keys
}
