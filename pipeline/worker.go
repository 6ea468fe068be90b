package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// Headers the pipeline reads and writes.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderMsgID          = jetstream.MsgIDHeader // Nats-Msg-Id
	HeaderKey            = "Dedupe-Key"
	HeaderStatus         = "Dedupe-Status"
	HeaderReason         = "Dedupe-Reason"
	HeaderError          = "Dedupe-Error"
	HeaderSubject        = "Dedupe-Subject"
	HeaderInputSeq       = "Dedupe-Input-Seq"
	HeaderTruncated      = "Dedupe-Truncated"
	HeaderVerified       = "Ingest-Verified"
)

// Values of the Dedupe-Status header.
const (
	StatusUnique    = "unique"
	StatusUnkeyed   = "unkeyed"
	StatusDuplicate = "duplicate"
)

// Dead-letter reasons: the last token of the dead-letter subject.
const (
	DeadBadSubject   = "bad-subject"
	DeadBadTenant    = "bad-tenant"
	DeadBadSource    = "bad-source"
	DeadBadClaim     = "bad-claim"     // the window refused the claim as invalid (kvwindow.ErrInvalid)
	DeadOutputReject = "output-reject" // the output stream refused the event for good (e.g. too large)
)

// envelope is what inspection decides about one delivery, before any network round trip.
type envelope struct {
	seq            uint64
	tenant, source string
	src            *sourceState
	key            string      // the event key ("" when unkeyed)
	reason         keys.Reason // why there is no key ("" when keyed)
	dead           string      // dead-letter reason token ("" when the envelope can be processed)
	deadErr        string      // readable dead-letter reason
}

// inspect parses the subject, checks the ids and finds the key: everything that needs no network.
func (p *Pipeline) inspect(e *envelope, subject string, hdr nats.Header, body []byte, seq uint64) {
	*e = envelope{seq: seq, src: p.other}
	rest, ok := strings.CutPrefix(subject, p.inPrefixDot)
	dot := strings.IndexByte(rest, '.')
	if !ok || dot < 0 || strings.IndexByte(rest[dot+1:], '.') >= 0 {
		e.dead = DeadBadSubject
		e.deadErr = fmt.Sprintf("subject %q is not of the form %s<tenant>.<source>", subject, p.inPrefixDot)
		return
	}
	e.tenant, e.source = rest[:dot], rest[dot+1:]
	e.src = p.source(e.source)
	if !keys.ValidID(e.tenant) {
		e.dead = DeadBadTenant
		e.deadErr = fmt.Sprintf("tenant %q must be 1-64 characters of [A-Za-z0-9_-]", e.tenant)
		return
	}
	if !keys.ValidID(e.source) {
		e.dead = DeadBadSource
		e.deadErr = fmt.Sprintf("source %q must be 1-64 characters of [A-Za-z0-9_-]", e.source)
		return
	}
	if unverified(hdr) {
		e.reason = ReasonUnverified
		return
	}
	if !e.src.spec.Enabled() {
		e.reason = keys.ReasonNoDedupe
		return
	}
	e.key, e.reason = p.cfg.Extractor.Extract(e.src.spec, keys.NATSHeaders(hdr), body)
	if e.key == "" && e.reason == keys.ReasonNone {
		e.reason = keys.ReasonMissing
	}
}

// unverified reports whether the ingest service marked the delivery's signature as not verified.
func unverified(hdr nats.Header) bool {
	v, ok := keys.NATSHeaders(hdr).Get(HeaderVerified)
	return ok && strings.EqualFold(strings.TrimSpace(v), "false")
}

// ttl is the claim TTL of a spec: its own or the default, in whole seconds, at least one.
func (p *Pipeline) ttl(spec keys.Spec) time.Duration {
	d := spec.TTL(p.cfg.DefaultTTL)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// worker processes one envelope at a time. Its buffers (the outbound message and header map, the value slices)
// are reused from one envelope to the next once JetStream has answered the publish that used them.
type worker struct {
	p     *Pipeline
	ctx   context.Context
	timer *time.Timer
	e     envelope
	msg   *nats.Msg
	vals  [6]string
	buf   []byte
}

func (p *Pipeline) newWorker(ctx context.Context) *worker {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &worker{p: p, ctx: ctx, timer: t, msg: &nats.Msg{Header: make(nats.Header, 16)}, buf: make([]byte, 0, 256)}
}

func (w *worker) loop(rs *runState) {
	for {
		select {
		case m := <-rs.work:
			w.handle(m)
		case <-rs.quit:
			return
		}
	}
}

// handle takes one envelope through inspect → claim → publish → ack. Every path ends in exactly one of Ack (the
// outcome is durable), NakWithDelay (retry later) or, at shutdown, Nak.
func (w *worker) handle(m jetstream.Msg) {
	p := w.p
	p.m.inFlight.Inc()
	defer p.m.inFlight.Dec()
	meta, err := m.Metadata()
	if err != nil {
		p.log.Error("pipeline: delivery without JetStream metadata", "subject", m.Subject(), "err", err)
		_ = m.Nak()
		return
	}
	e := &w.e
	p.inspect(e, m.Subject(), m.Headers(), m.Data(), meta.Sequence.Stream)
	if e.dead != "" {
		w.deadLetter(m, meta, e.dead, e.deadErr)
		return
	}
	if e.key == "" {
		w.forward(m, meta, rebuildUnkeyed)
		return
	}

	start := time.Now()
	out, err := p.cfg.Window.Claim(w.ctx, kvwindow.Claim{
		Tenant: e.tenant, Source: e.source, Key: e.key, TTL: p.ttl(e.src.spec), Claimant: e.seq,
		FirstDelivery: meta.NumDelivered == 1,
	})
	p.m.claimDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		switch {
		case w.ctx.Err() != nil:
			w.nak(m, 0, p.nakShutdown)
		case errors.Is(err, kvwindow.ErrInvalid):
			w.deadLetter(m, meta, DeadBadClaim, err.Error())
		default:
			p.windowDown(err)
			if p.cfg.ForwardWhenWindowDown {
				e.reason = ReasonWindowUnavailable
				w.forward(m, meta, rebuildUnkeyed)
				return
			}
			w.nak(m, nakDelay(meta.NumDelivered), p.nakWindow)
		}
		return
	}
	p.windowUp()
	switch out.Status {
	case kvwindow.Won, kvwindow.Owned:
		w.forward(m, meta, out.Revision)
	case kvwindow.Duplicate:
		w.duplicate(m, meta)
	default:
		p.log.Error("pipeline: window returned an unknown claim status", "status", out.Status)
		w.nak(m, nakDelay(meta.NumDelivered), p.nakWindow)
	}
}

// rebuildUnkeyed, passed as the revision, asks forward for the unkeyed form.
const rebuildUnkeyed = 0

// forward publishes the envelope as a unique event (rev > 0: the claim's revision) or unkeyed (rev 0), then acks.
func (w *worker) forward(m jetstream.Msg, meta *jetstream.MsgMetadata, rev uint64) {
	p, e := w.p, &w.e
	out := w.buildOutput(m.Subject(), m.Headers(), m.Data(), rev)
	err := w.publish(out)
	if err == nil {
		w.ack(m)
		if rev != rebuildUnkeyed {
			e.src.unique.Inc()
		} else {
			e.src.unkeyedN.Inc()
			e.src.reason(e.reason).Inc()
		}
		if p.log.Enabled(w.ctx, slog.LevelDebug) {
			p.log.Debug("pipeline: forwarded", "seq", e.seq, "subject", out.Subject, "key", e.key, "reason", string(e.reason),
				"msg_id", out.Header.Get(HeaderMsgID))
		}
		return
	}
	w.publishFailed(m, meta, err, rev != rebuildUnkeyed)
}

// duplicate acks a copy of an event already claimed, after publishing the optional duplicate copy.
func (w *worker) duplicate(m jetstream.Msg, meta *jetstream.MsgMetadata) {
	p, e := w.p, &w.e
	if p.dupPrefixDot != "" {
		out := w.buildDuplicate(m.Subject(), m.Headers(), m.Data())
		if err := w.publish(out); err != nil {
			if !permanent(err) || w.ctx.Err() != nil {
				w.publishFailed(m, meta, err, false)
				return
			}
			p.log.Warn("pipeline: duplicate copy refused by the output stream; counted only", "seq", e.seq, "subject", out.Subject, "err", err)
		}
	}
	w.ack(m)
	e.src.duplicate.Inc()
	if p.log.Enabled(w.ctx, slog.LevelDebug) {
		p.log.Debug("pipeline: duplicate", "seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key)
	}
}

// publishFailed handles a failed publish of the envelope's outcome: dead letter when the output stream will never
// take it, otherwise hand it back for a later attempt. claimed says the envelope holds the event's claim.
func (w *worker) publishFailed(m jetstream.Msg, meta *jetstream.MsgMetadata, err error, claimed bool) {
	p := w.p
	if w.ctx.Err() != nil {
		w.nak(m, 0, p.nakShutdown)
		return
	}
	if permanent(err) {
		w.deadLetterAndRelease(m, meta, DeadOutputReject, fmt.Sprintf("output stream %s refused the event: %v", p.cfg.OutputStream, err), claimed)
		return
	}
	if ok, n := p.publishLog.allow(); ok {
		p.log.Warn("pipeline: publish failed; envelopes are handed back (NAK with backoff)",
			"stream", p.cfg.OutputStream, "err", err, "failures_since_last_log", n)
	}
	w.nak(m, nakDelay(meta.NumDelivered), p.nakPublish)
}

// deadLetter publishes the envelope to "<dlq prefix>.<reason>" and acks it; if even that fails it is handed back.
func (w *worker) deadLetter(m jetstream.Msg, meta *jetstream.MsgMetadata, reason, why string) {
	w.deadLetterAndRelease(m, meta, reason, why, false)
}

// deadLetterAndRelease is deadLetter that, with release, also gives up the envelope's claim once the dead letter
// is stored and before the ack: the event never reached the output stream, so a later, well-formed copy of it must
// be admitted. A failed release is logged; the claim then lapses at its TTL.
func (w *worker) deadLetterAndRelease(m jetstream.Msg, meta *jetstream.MsgMetadata, reason, why string, release bool) {
	p, e := w.p, &w.e
	out := w.buildDeadLetter(m.Subject(), m.Headers(), m.Data(), reason, why)
	err := w.publish(out)
	// An envelope near the size limits may fit in the input stream but not beside the dead letter's own headers.
	// Keep what fits rather than retry for ever: the sender's headers go, the body is cut, and the dead letter says
	// so and names the envelope's sequence in the input stream, where the original still is.
	for _, keep := range []int{int(p.js.Conn().MaxPayload()) - trimmedRoom, 0} {
		if err == nil || !permanent(err) || w.ctx.Err() != nil || keep < 0 {
			break
		}
		out = w.buildTrimmedDeadLetter(m.Subject(), m.Headers(), m.Data(), reason, why, keep)
		err = w.publish(out)
	}
	if err != nil {
		if w.ctx.Err() != nil {
			w.nak(m, 0, p.nakShutdown)
			return
		}
		p.log.Error("pipeline: dead letter not stored; handing the envelope back", "seq", e.seq, "subject", m.Subject(),
			"reason", reason, "error", why, "err", err)
		w.nak(m, nakDelay(meta.NumDelivered), p.nakDeadLetter)
		return
	}
	if release {
		if _, err := p.cfg.Window.Forget(w.ctx, e.tenant, e.source, e.key); err != nil {
			p.log.Warn("pipeline: claim of a dead-lettered event not released; copies are suppressed until it expires",
				"seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "err", err)
		}
	}
	w.ack(m)
	e.src.deadLetters.Inc()
	p.log.Warn("pipeline: dead letter", "seq", e.seq, "subject", m.Subject(), "reason", reason, "error", why)
}

func (w *worker) ack(m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		// The outcome is durable; the redelivery will find it (Owned / Nats-Msg-Id) and ack again.
		w.p.log.Debug("pipeline: ack failed", "subject", m.Subject(), "err", err)
	}
}

func (w *worker) nak(m jetstream.Msg, delay time.Duration, c interface{ Inc() }) {
	var err error
	if delay > 0 {
		err = m.NakWithDelay(delay)
	} else {
		err = m.Nak()
	}
	c.Inc()
	if err != nil {
		w.p.log.Debug("pipeline: nak failed; the envelope is redelivered after the ack wait", "subject", m.Subject(), "err", err)
	}
}

var errPublishTimeout = errors.New("pipeline: no publish acknowledgement in time")

// publish sends out and waits for JetStream's answer. When it returns without an answer (timeout, shutdown) the
// message still belongs to the client library, so the worker takes fresh buffers for its next envelope.
func (w *worker) publish(out *nats.Msg) error {
	p := w.p
	start := time.Now()
	f, err := p.js.PublishMsgAsync(out)
	if err != nil {
		return err
	}
	w.timer.Reset(p.cfg.PublishTimeout)
	select {
	case <-f.Ok():
		w.timer.Stop()
		p.m.publishDuration.Observe(time.Since(start).Seconds())
		return nil
	case err := <-f.Err():
		w.timer.Stop()
		return err
	case <-w.timer.C:
		w.msg = &nats.Msg{Header: make(nats.Header, 16)}
		return errPublishTimeout
	case <-w.ctx.Done():
		w.timer.Stop()
		w.msg = &nats.Msg{Header: make(nats.Header, 16)}
		return w.ctx.Err()
	}
}

// permanent reports whether a publish can never succeed, so retrying is pointless: the message is too large for
// the server or the stream.
func permanent(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum,
			10097: // JSStreamHeaderExceedsMaximumErr: the header block is over JetStream's 64 KiB
			return true
		case 10077: // JSStreamStoreFailedF: permanent only when the message itself is too large
			return strings.Contains(strings.ToLower(apiErr.Description), "message too large")
		}
	}
	return false
}

// reserved reports whether an inbound header is one the pipeline owns: Nats-* (JetStream control), and, unless
// keepIdempotency, Idempotency-Key; Dedupe-* always. Names match ignoring ASCII case.
func reserved(name string, keepIdempotency bool) bool {
	if hasPrefixFold(name, "nats-") || hasPrefixFold(name, "dedupe-") {
		return true
	}
	return !keepIdempotency && len(name) == len(HeaderIdempotencyKey) && strings.EqualFold(name, HeaderIdempotencyKey)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// headers resets the worker's outbound message to subject and body with the inbound headers minus reserved ones.
// Value slices are shared with the inbound message (neither side modifies them).
func (w *worker) headers(subject string, in nats.Header, body []byte, keepIdempotency bool) *nats.Msg {
	out := w.msg
	h := out.Header
	clear(h)
	for k, v := range in {
		if !reserved(k, keepIdempotency) {
			h[k] = v
		}
	}
	out.Subject, out.Data, out.Reply = subject, body, ""
	return out
}

func (w *worker) set(i int, name, value string) {
	w.vals[i] = value
	w.msg.Header[name] = w.vals[i : i+1 : i+1]
}

// buildOutput builds the unique (rev > 0) or unkeyed (rev 0) event for the output stream.
func (w *worker) buildOutput(subject string, in nats.Header, body []byte, rev uint64) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(p.outPrefixDot+subject[len(p.inPrefixDot):], in, body, false)
	if rev != rebuildUnkeyed {
		b := append(w.buf[:0], e.tenant...)
		b = append(b, ':')
		b = append(b, e.source...)
		b = append(b, ':')
		b = append(b, e.key...)
		n := len(b)
		b = append(b, '#')
		b = strconv.AppendUint(b, rev, 10)
		id := string(b)
		w.buf = b[:0]
		w.set(0, HeaderIdempotencyKey, id[:n])
		w.set(1, HeaderMsgID, id)
		w.set(2, HeaderKey, e.key)
		w.set(3, HeaderStatus, StatusUnique)
		return w.msg
	}
	id := w.seqID(p.unkeyedIDPrefix)
	w.set(0, HeaderIdempotencyKey, id)
	w.set(1, HeaderMsgID, id)
	w.set(3, HeaderStatus, StatusUnkeyed)
	w.set(4, HeaderReason, string(e.reason))
	if e.key != "" {
		w.set(2, HeaderKey, e.key)
	}
	return w.msg
}

// buildDuplicate builds the copy of a duplicate for "<duplicates prefix>.<tenant>.<source>".
func (w *worker) buildDuplicate(subject string, in nats.Header, body []byte) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(p.dupPrefixDot+subject[len(p.inPrefixDot):], in, body, false)
	w.set(0, HeaderIdempotencyKey, keys.IdempotencyKey(e.tenant, e.source, e.key))
	w.set(1, HeaderMsgID, w.seqID(p.dupIDPrefix))
	w.set(2, HeaderKey, e.key)
	w.set(3, HeaderStatus, StatusDuplicate)
	return w.msg
}

// buildDeadLetter builds the dead letter for "<dlq prefix>.<reason>".
func (w *worker) buildDeadLetter(subject string, in nats.Header, body []byte, reason, why string) *nats.Msg {
	p := w.p
	w.headers(p.cfg.DLQPrefix+"."+reason, in, body, true)
	w.set(0, HeaderError, why)
	w.set(1, HeaderSubject, subject)
	w.set(2, HeaderMsgID, w.seqID(p.dlqIDPrefix))
	w.set(3, HeaderInputSeq, strconv.FormatUint(w.e.seq, 10))
	return w.msg
}

// trimmedRoom is what a trimmed dead letter leaves of the server's max payload for its subject and headers.
const trimmedRoom = 8 << 10

// buildTrimmedDeadLetter is the dead letter of an envelope too large to be dead-lettered whole: none of the
// sender's headers, at most keep bytes of the body, and Dedupe-Truncated saying what was dropped.
func (w *worker) buildTrimmedDeadLetter(subject string, in nats.Header, body []byte, reason, why string, keep int) *nats.Msg {
	p := w.p
	hdrBytes := 0
	for k, vs := range in {
		for _, v := range vs {
			hdrBytes += len(k) + len(v) + 4
		}
	}
	kept := body[:min(len(body), keep)]
	w.headers(p.cfg.DLQPrefix+"."+reason, nil, kept, true)
	w.set(0, HeaderError, why)
	w.set(1, HeaderSubject, subject)
	w.set(2, HeaderMsgID, w.seqID(p.dlqIDPrefix))
	w.set(3, HeaderInputSeq, strconv.FormatUint(w.e.seq, 10))
	w.set(4, HeaderTruncated, fmt.Sprintf("sender headers (%d bytes) dropped; body %d of %d bytes kept; the original is message %d of stream %s",
		hdrBytes, len(kept), len(body), w.e.seq, p.cfg.InputStream))
	return w.msg
}

// seqID is prefix followed by the envelope's stream sequence.
func (w *worker) seqID(prefix string) string {
	b := append(w.buf[:0], prefix...)
	b = strconv.AppendUint(b, w.e.seq, 10)
	w.buf = b[:0]
	return string(b)
}
