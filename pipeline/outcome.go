package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// publishResult is the protocol's name for the answer to an output publish sent at sent (p.clock).
func (w *worker) publishResult(err error, sent time.Duration) protocol.PublishResult {
	switch {
	case err == nil:
		w.p.publishUp()
		return protocol.PublishStored
	case w.ctx.Err() != nil:
		return protocol.PublishCancelled
	case jserr.TooLarge(err):
		return protocol.PublishRefused
	}
	w.p.publishDown(err, sent)
	w.p.streamMissing(err)
	return protocol.PublishFailed
}

// deadLetter publishes the envelope to "<dlq prefix>.<reason>" and reports the dead-letter stream's answer
// (PublishFailed when even a trimmed dead letter was refused).
func (w *worker) deadLetter(d *delivery, reason, why string) protocol.PublishResult {
	p, m := w.p, d.msg
	sent := p.clock()
	out := w.buildDeadLetter(m.Subject, m.Header, m.Data, reason, why)
	err := w.publish(out)
	// An envelope near the size limits may not fit beside the dead letter's own headers: keep what fits rather
	// than retry for ever (buildTrimmedDeadLetter).
	for _, keep := range []int{int(p.nc.MaxPayload()) - trimmedRoom, 0} {
		if err == nil || !jserr.TooLarge(err) || w.ctx.Err() != nil || keep < 0 {
			break
		}
		out = w.buildTrimmedDeadLetter(m.Subject, m.Header, m.Data, reason, why, keep)
		err = w.publish(out)
	}
	switch {
	case err == nil:
		p.cleared(&p.deadLetters, "pipeline: dead letters stored again", p.cfg.DLQStream)
		return protocol.PublishStored
	case w.ctx.Err() != nil:
		return protocol.PublishCancelled
	}
	p.log.Error("pipeline: dead letter not stored; handing the envelope back", "seq", w.e.seq, "subject", m.Subject,
		"reason", reason, "error", why, "err", err)
	// Readiness reports it as it reports failing output publishes: the envelope is handed back until the
	// dead-letter stream takes it.
	p.failed(&p.deadLetters, err, sent)
	p.streamMissing(err)
	return protocol.PublishFailed
}

// ack acknowledges the delivery and reports whether the server confirmed it (ackFailed when not); the outcome is
// durable, so the redelivery finds it and acks again. It is sent even during a shutdown.
func (w *worker) ack(d *delivery) bool {
	sent := w.p.clock()
	err := w.p.ackMsg(w.durable, d, &w.ackOut)
	switch {
	case err == nil:
		w.p.ackUp()
		return true
	case errors.Is(err, nats.ErrNoResponders):
		w.p.ackFailed(AckNoConsumer, fmt.Errorf("no consumer took the ack (deleted, or its stream): %w", err), sent)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		if refusal := w.p.ackRefusal(d); refusal != nil {
			w.p.ackFailed(AckRefused, refusal, sent)
		} else if w.ctx.Err() == nil {
			w.p.ackFailed(AckUnconfirmed, fmt.Errorf("no answer to the ack within %s: %w", w.p.ackTimeout(), err), sent)
		}
	default:
		w.p.ackFailed(AckError, err, sent)
	}
	return false
}

func (w *worker) nak(d *delivery, delay time.Duration, c interface{ Inc() }) {
	err := w.p.nakMsg(d, delay)
	c.Inc()
	if err != nil {
		w.p.log.Debug("pipeline: nak failed; the envelope is redelivered after the ack wait", "subject", d.msg.Subject, "err", err)
	}
}

// publish sends out to JetStream and waits for its answer, at most PublishTimeout (natsreq.Publish). out may be
// reused as soon as publish returns, whatever it returns.
func (w *worker) publish(out *nats.Msg) error {
	p := w.p
	start := time.Now()
	_, err := p.req.Publish(w.ctx, out, p.cfg.PublishTimeout)
	if errors.Is(err, nats.ErrTimeout) {
		return errPublishTimeout
	}
	if err != nil {
		return err
	}
	p.m.publishDuration.Observe(time.Since(start).Seconds())
	return nil
}

var errPublishTimeout = errors.New("pipeline: no publish acknowledgement in time")
