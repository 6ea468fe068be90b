package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// forward publishes the envelope as a unique event (keyed: claim is the claim it holds, res the outcome) or
// unkeyed (claim nil), records a keyed publish in its claim, then acks. A keyed event's output was built before
// the claim; an unkeyed one is built here.
func (w *worker) forward(d *delivery, claim *kvwindow.Claim, res kvwindow.Outcome) {
	p, e, m := w.p, &w.e, d.msg
	keyed := claim != nil
	var out *nats.Msg
	if keyed {
		out = &w.out.msg
	} else {
		out = w.buildOutput(m.Subject, m.Header, m.Data, false)
		if why := p.unpublishable(out); why != "" {
			w.deadLetter(d, DeadOutputReject, why)
			return
		}
	}
	// The last moment to give up: once handed to the client library the publish goes out even if this process is
	// paused right after. A delivery held too long (or across a pause of the process) may meanwhile have been
	// redelivered to another replica and published there more than the output's duplicate window ago.
	if why := p.tooOld(e.received); why != "" {
		if ok, n := p.heldLog.allow(); ok {
			p.log.Warn("pipeline: delivery handed back instead of published", "seq", e.seq, "why", why, "since_last_log", n)
		}
		w.nak(d, 0, p.nakHeld)
		return
	}
	if err := w.publish(out); err != nil {
		w.publishFailed(d, err, keyed, res.Revision)
		return
	}
	if p.log.Enabled(w.ctx, slog.LevelDebug) {
		p.log.Debug("pipeline: forwarded", "seq", e.seq, "subject", out.Subject, "key", e.key, "reason", string(e.reason),
			"msg_id", out.Header.Get(HeaderMsgID))
	}
	w.stored = keyed
	if keyed {
		w.storedRev = res.Revision
	}
	if !keyed {
		w.ack(d)
		e.src.unkeyedN.Inc()
		e.src.reason(e.reason).Inc()
		return
	}
	claim.FirstClaimed = res.FirstClaimed
	if p.inputKeeps.Load() {
		// The input stream keeps acknowledged envelopes, so a waiting copy cannot tell a finished holder by its
		// absence: record the publish in the claim before the ack.
		if !w.record(d, claim, res.Revision, true) {
			return
		}
		w.ack(d)
		e.src.unique.Inc()
		return
	}
	if !w.ack(d) {
		// The ack may be lost (this process may not live to know: the redelivery then relies on the output's
		// duplicate window). Record the publish in the claim, so that a redelivery after any delay only acks.
		w.record(d, claim, res.Revision, false)
	}
	e.src.unique.Inc()
}

// record records the publish of claim (at revision rev) in the claim. It reports false when the envelope was
// handed back instead (only with handBack: the record failed, so the redelivery republishes under the same
// Nats-Msg-Id — collapsed within the output's duplicate window — and records).
func (w *worker) record(d *delivery, claim *kvwindow.Claim, rev uint64, handBack bool) bool {
	p, e := w.p, &w.e
	newRev, ok, err := p.cfg.Window.MarkPublished(w.ctx, *claim, rev)
	w.storedRev = 0
	if err == nil && ok {
		w.storedRev = newRev
	}
	switch {
	case err != nil:
		if w.ctx.Err() != nil && handBack {
			w.nak(d, 0, p.nakShutdown)
			return false
		}
		p.windowDown(err)
		if handBack {
			w.nak(d, nakDelay(d.delivered), p.nakRecord)
			return false
		}
		p.log.Warn("pipeline: publish not recorded in its claim after an unconfirmed ack; a redelivery later than the output's "+
			"duplicate window would be published again, marked as a possible duplicate", "seq", e.seq, "key", e.key, "err", err)
	case !ok:
		// The key moved on meanwhile: a later delivery of this envelope took the claim over (it publishes under
		// the same Nats-Msg-Id and records), or the claim lapsed or was forgotten. The event is stored.
		if why := p.tooOld(e.received); why != "" {
			// This process was held (frozen) with the publish in the client library: the delivery that took the
			// claim over may have published longer ago than the output's duplicate window. Too late to mark it.
			p.m.possibleDuplicates.Inc()
			p.log.Warn("pipeline: published after another delivery took the claim over; the output may hold this event twice",
				"seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "why", why)
		} else {
			p.log.Debug("pipeline: published, but the claim had moved on before the publish was recorded", "seq", e.seq, "key", e.key)
		}
	}
	return true
}

// duplicate acks a copy of an event already published, after publishing the optional duplicate copy.
func (w *worker) duplicate(d *delivery) {
	p, e, m := w.p, &w.e, d.msg
	if p.dupPrefixDot != "" {
		out := w.buildDuplicate(m.Subject, m.Header, m.Data)
		if err := w.publish(out); err != nil {
			if !permanent(err) || w.ctx.Err() != nil {
				w.publishFailed(d, err, false, 0)
				return
			}
			p.log.Warn("pipeline: duplicate copy refused by the output stream; counted only", "seq", e.seq, "subject", out.Subject, "err", err)
		}
	}
	w.ack(d)
	e.src.duplicate.Inc()
	if p.log.Enabled(w.ctx, slog.LevelDebug) {
		p.log.Debug("pipeline: duplicate", "seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key)
	}
}

// publishFailed handles a failed publish of the envelope's outcome: dead letter when the output stream will never
// take it, otherwise hand it back for a later attempt. claimed says the envelope holds the event's claim, at rev.
func (w *worker) publishFailed(d *delivery, err error, claimed bool, rev uint64) {
	p := w.p
	if w.ctx.Err() != nil {
		w.nak(d, 0, p.nakShutdown)
		return
	}
	if permanent(err) {
		w.deadLetterAndRelease(d, DeadOutputReject, fmt.Sprintf("output stream %s refused the event: %v", p.cfg.OutputStream, err), claimed, rev)
		return
	}
	p.publishDown(err)
	w.nak(d, nakDelay(d.delivered), p.nakPublish)
}

// deadLetter publishes the envelope to "<dlq prefix>.<reason>" and acks it; if even that fails it is handed back.
func (w *worker) deadLetter(d *delivery, reason, why string) {
	w.deadLetterAndRelease(d, reason, why, false, 0)
}

// deadLetterAndRelease is deadLetter that, with release, also gives up the envelope's claim (at revision rev)
// once the dead letter is stored and before the ack: the event never reached the output stream, so a later,
// well-formed copy of it must be admitted (copies wait while the claim is undecided). The release removes the
// claim only while it is still this envelope's (revision-checked), never another envelope's. A failed release is
// logged; the claim then lapses at its TTL, and copies wait until then.
func (w *worker) deadLetterAndRelease(d *delivery, reason, why string, release bool, rev uint64) {
	p, e, m := w.p, &w.e, d.msg
	out := w.buildDeadLetter(m.Subject, m.Header, m.Data, reason, why)
	err := w.publish(out)
	// An envelope near the size limits may fit in the input stream but not beside the dead letter's own headers.
	// Keep what fits rather than retry for ever: the sender's headers go, the body is cut, and the dead letter says
	// so and names the envelope's sequence in the input stream, where the original still is.
	for _, keep := range []int{int(p.nc.MaxPayload()) - trimmedRoom, 0} {
		if err == nil || !permanent(err) || w.ctx.Err() != nil || keep < 0 {
			break
		}
		out = w.buildTrimmedDeadLetter(m.Subject, m.Header, m.Data, reason, why, keep)
		err = w.publish(out)
	}
	if err != nil {
		if w.ctx.Err() != nil {
			w.nak(d, 0, p.nakShutdown)
			return
		}
		p.log.Error("pipeline: dead letter not stored; handing the envelope back", "seq", e.seq, "subject", m.Subject,
			"reason", reason, "error", why, "err", err)
		w.nak(d, nakDelay(d.delivered), p.nakDeadLetter)
		return
	}
	if release {
		if _, err := p.cfg.Window.Release(w.ctx, e.tenant, e.source, e.key, rev); err != nil {
			// Acking now would leave the claim looking like a finished holder's: its copies would be dropped and
			// the event live on only as this dead letter. Hand back: the redelivery dead-letters again (under the
			// same Nats-Msg-Id) and releases.
			p.log.Warn("pipeline: claim of a dead-lettered event not released; handing the envelope back",
				"seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "err", err)
			p.windowDown(err)
			w.nak(d, nakDelay(d.delivered), p.nakWindow)
			return
		}
	}
	w.ack(d)
	e.src.deadLetters.Inc()
	p.log.Warn("pipeline: dead letter", "seq", e.seq, "subject", m.Subject, "reason", reason, "error", why)
}

// ack acknowledges the delivery and reports whether the server confirmed it. An ack that fails is counted and
// makes the pipeline unready for a while; the outcome is durable, so the redelivery finds it (the claim's record,
// the holder gone, or Nats-Msg-Id) and acks again.
func (w *worker) ack(d *delivery) bool {
	err := w.p.ackMsg(w.ctx, d, &w.ackOut)
	switch {
	case err == nil:
		return true
	case errors.Is(err, nats.ErrNoResponders):
		w.p.ackFailed(AckNoConsumer, fmt.Errorf("no consumer took the ack (deleted, or its stream): %w", err))
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		if w.ctx.Err() == nil {
			w.p.ackFailed(AckUnconfirmed, fmt.Errorf("no answer to the ack within %s: %w", w.p.ackTimeout(), err))
		}
	default:
		w.p.ackFailed(AckError, err)
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

// publish sends out to JetStream and waits for its answer, at most PublishTimeout (natsreq.Publish: retries of "no
// responders", the server's refusal as *jetstream.APIError). The message is written to the connection before the
// wait, so out may be reused as soon as publish returns, whatever it returns.
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
	p.publishUp()
	return nil
}

var errPublishTimeout = errors.New("pipeline: no publish acknowledgement in time")
