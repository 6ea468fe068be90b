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
	HeaderInputStream    = "Dedupe-Input-Stream"
	HeaderTruncated      = "Dedupe-Truncated"
	HeaderVerified       = "Ingest-Verified"
	// HeaderPossibleDuplicate marks an output that may be a second copy of its event (README, "When never
	// published twice holds"): consumers that must never act twice check it against their own records.
	HeaderPossibleDuplicate = "Dedupe-Possible-Duplicate"
	// HeaderOriginalStatus and HeaderOriginalDescription keep, in a dead letter, the Status and Description headers
	// of an envelope shaped like a server status message (DeadControlHeader).
	HeaderOriginalStatus      = "Dedupe-Original-Status"
	HeaderOriginalDescription = "Dedupe-Original-Description"
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
	// DeadControlHeader: an empty body with a Status header, which NATS clients take for a server status message.
	DeadControlHeader = "control-header"
)

// envelope is what inspection decides about one delivery, before any network round trip.
type envelope struct {
	seq            uint64        // sequence in the input stream
	stamp          int64         // the input stream's timestamp of the message (unix ns): with seq, the envelope's identity
	received       time.Duration // when the consume handler received the delivery (p.clock)
	tenant, source string
	src            *sourceState
	key            string      // the event key ("" when unkeyed)
	reason         keys.Reason // why there is no key ("" when keyed)
	dead           string      // dead-letter reason token ("" when the envelope can be processed)
	deadErr        string      // readable dead-letter reason
}

// inspect parses the subject, checks the ids and finds the key: everything that needs no network.
func (p *Pipeline) inspect(e *envelope, subject string, hdr nats.Header, body []byte, seq uint64, stamp int64) {
	*e = envelope{seq: seq, stamp: stamp, src: p.other}
	// <prefix>.<tenant>.<source>[.<more>...]: extra tokens (an event type, say) are kept on the output subject; the
	// window's scope stays tenant and source.
	rest, ok := strings.CutPrefix(subject, p.inPrefixDot)
	dot := strings.IndexByte(rest, '.')
	if !ok || dot < 0 {
		e.dead = DeadBadSubject
		e.deadErr = fmt.Sprintf("subject %q is not of the form %s<tenant>.<source>[.<more>...]", subject, p.inPrefixDot)
		return
	}
	e.tenant, e.source = rest[:dot], rest[dot+1:]
	if end := strings.IndexByte(e.source, '.'); end >= 0 {
		e.source = e.source[:end]
	}
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
	if controlShaped(hdr, body) {
		// Published as it is, every NATS client reading the output would take it for a status message of the
		// server and drop it (or stop consuming). The dead letter keeps the two headers under other names.
		e.dead = DeadControlHeader
		e.deadErr = fmt.Sprintf("the envelope has an empty body and a Status header (%q), which NATS clients take for a server "+
			"status message; kept here as %s/%s", hdr.Get(statusHeader), HeaderOriginalStatus, HeaderOriginalDescription)
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

// unverified reports whether the delivery may not claim a key: some value of Ingest-Verified, under any letter
// case of the name, says anything but "true". A sender that adds "Ingest-Verified: true" beside the ingest
// service's "false" (a second value, or another spelling of the name) must not win; a delivery without the header
// counts as verified (the ingest service did not mark it).
func unverified(hdr nats.Header) bool {
	for name, vals := range hdr {
		if len(name) != len(HeaderVerified) || !strings.EqualFold(name, HeaderVerified) {
			continue
		}
		if len(vals) == 0 {
			return true
		}
		for _, v := range vals {
			if !strings.EqualFold(strings.TrimSpace(v), "true") {
				return true
			}
		}
	}
	return false
}

// ttl is the claim TTL of a spec: its own or the default, in whole seconds, at least one.
func (p *Pipeline) ttl(spec keys.Spec) time.Duration {
	d := spec.TTL(p.cfg.DefaultTTL)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// outMsg is one outbound message with the storage of the header values the worker sets. Once handed to the client
// library it belongs to the library until JetStream answered; a worker that stops waiting takes a fresh one, so
// that a message the library still holds never shares a buffer with the next envelope.
type outMsg struct {
	msg  nats.Msg
	vals [9]string
}

func newOutMsg() *outMsg { return &outMsg{msg: nats.Msg{Header: make(nats.Header, 16)}} }

// worker processes one envelope at a time. Its buffers (the outbound message and header map, the value slices)
// are reused from one envelope to the next once JetStream has answered the publish that used them.
type worker struct {
	p   *Pipeline
	ctx context.Context
	e   envelope
	out *outMsg
	buf []byte
	// ackOut is the ack request, reused: natsreq writes it to the connection before waiting.
	ackOut nats.Msg
	// stored says the last keyed forward stored its event in the output stream; storedRev is the revision of
	// its last write on the key (the claim, or the publish mark), 0 when unknown.
	stored    bool
	storedRev uint64
	hk        string // holderKey of the envelope being handled (keyed envelopes)
}

func (p *Pipeline) newWorker(ctx context.Context) *worker {
	return &worker{p: p, ctx: ctx, out: newOutMsg(), buf: make([]byte, 0, 256)}
}

func (w *worker) loop(rs *runState) {
	for {
		select {
		case d := <-rs.work:
			w.handle(d)
		case <-rs.quit:
			return
		}
	}
}

// handle takes one envelope through inspect → claim → publish → record → ack. Every path ends in exactly one of
// Ack (the outcome is durable), NakWithDelay (retry later), Nak (shutdown), or — for a stale delivery, one that a
// later delivery of the same envelope has taken over — nothing: that later delivery decides.
func (w *worker) handle(d *delivery) {
	p := w.p
	p.m.inFlight.Inc()
	defer p.m.inFlight.Dec()
	m := d.msg
	e := &w.e
	p.inspect(e, m.Subject, m.Header, m.Data, d.seq, d.stamp)
	e.received = d.at
	if e.dead != "" {
		w.deadLetter(d, e.dead, e.deadErr)
		return
	}
	if e.key == "" {
		w.forward(d, nil, kvwindow.Outcome{})
		return
	}
	// Decide before claiming whether the output stream can take the event at all: a copy that can never be
	// published must not hold the claim, or a well-formed copy arriving meanwhile would wait for it in vain.
	out := w.buildOutput(m.Subject, m.Header, m.Data, true)
	unpublishable := p.unpublishable(out)
	if unpublishable != "" && d.delivered == 1 {
		w.deadLetter(d, DeadOutputReject, unpublishable)
		return
	}

	start := time.Now()
	w.hk = holderKey(e.tenant, e.source, e.key)
	claim := kvwindow.Claim{
		Tenant: e.tenant, Source: e.source, Key: e.key, TTL: p.ttl(e.src.spec),
		Claimant:      kvwindow.Claimant{Seq: e.seq, Stamp: e.stamp},
		Delivery:      kvwindow.Delivery{Consumer: p.consumerCreated.Load(), Count: d.delivered},
		FirstDelivery: d.delivered == 1,
		// A copy of an event this process published a moment ago is decided by the create's refusal alone.
		Known: p.holders.known(w.hk),
	}
	res, err := p.cfg.Window.Claim(w.ctx, claim)
	p.m.claimDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		switch {
		case w.ctx.Err() != nil:
			w.nak(d, 0, p.nakShutdown)
		case errors.Is(err, kvwindow.ErrInvalid):
			w.deadLetter(d, DeadBadClaim, err.Error())
		default:
			p.windowDown(err)
			if p.cfg.ForwardWhenWindowDown && !errors.Is(err, kvwindow.ErrWindowLost) {
				e.reason = ReasonWindowUnavailable
				w.forward(d, nil, kvwindow.Outcome{})
				return
			}
			w.nak(d, nakDelay(d.delivered), p.nakWindow)
		}
		return
	}
	p.windowUp()
	if unpublishable != "" && res.Status != kvwindow.Stale {
		// A redelivery that can no longer be published (the output's limits were lowered meanwhile): an earlier
		// delivery of it may hold the claim, which must be released with the dead letter — left in place it would
		// look like a finished holder's and its copies would be dropped.
		if res.Status == kvwindow.Won || res.Status == kvwindow.Owned && !res.Published {
			w.deadLetterAndRelease(d, DeadOutputReject, unpublishable, true, res.Revision)
		} else {
			w.deadLetter(d, DeadOutputReject, unpublishable)
		}
		return
	}
	switch res.Status {
	case kvwindow.Owned:
		if res.Published {
			// An earlier delivery of this envelope published the event and recorded it: publishing again could
			// outlive the output's duplicate window (a lost ack, then an outage). Only the ack is missing.
			w.ack(d)
			e.src.unique.Inc()
			return
		}
		if w.possibleDuplicate(res) {
			// An earlier delivery may have stored the event and lost its record, longer ago than the output's
			// duplicate window remembers: nobody can tell, so publish (never lose it) and say so.
			w.set(7, HeaderPossibleDuplicate, "true")
			p.m.possibleDuplicates.Inc()
			p.log.Warn("pipeline: publishing a possible second copy: an earlier delivery of this envelope may have stored it "+
				"longer ago than the output's duplicate window", "seq", e.seq, "tenant", e.tenant, "source", e.source,
				"key", e.key, "first_claimed", res.FirstClaimed, "duplicate_window", time.Duration(p.outDupWindow.Load()))
		}
		w.forwardHolding(d, &claim, res)
	case kvwindow.Won:
		w.forwardHolding(d, &claim, res)
	case kvwindow.Duplicate:
		if !res.Published && !w.holderDone(res) {
			// The holder has claimed but not yet published (or has just failed to): acking this copy now would
			// lose the event if the holder is refused, dead-lettered and releases the claim. Ask again later.
			w.nak(d, nakDelay(d.delivered), p.nakHolder)
			if ok, n := p.holderLog.allow(); ok {
				p.log.Info("pipeline: copy handed back until the envelope holding its claim is published", "seq", e.seq,
					"holder_seq", res.HolderSeq, "tenant", e.tenant, "source", e.source, "key", e.key, "since_last_log", n)
			}
			return
		}
		w.duplicate(d)
	case kvwindow.Stale:
		p.m.stale.Inc()
		p.log.Debug("pipeline: stale delivery skipped: a later delivery of the envelope holds its claim",
			"seq", e.seq, "delivered", d.delivered, "tenant", e.tenant, "source", e.source)
	default:
		p.log.Error("pipeline: window returned an unknown claim status", "status", res.Status)
		w.nak(d, nakDelay(d.delivered), p.nakWindow)
	}
}

// forwardHolding is forward for the envelope that holds its key's claim, known to this process's other workers
// while it does (holders), so that a copy arriving meanwhile waits for it here.
func (w *worker) forwardHolding(d *delivery, claim *kvwindow.Claim, res kvwindow.Outcome) {
	k := w.hk
	hd := w.p.holders.begin(k, claim.Claimant.Seq, claim.Claimant.Stamp)
	w.stored, w.storedRev = false, 0
	w.forward(d, claim, res)
	w.p.holders.finish(k, hd, w.stored, w.storedRev)
}

// holderDone reports whether the envelope holding a Duplicate's claim is finished with it: published by this
// process (waiting for it while one of this process's workers holds it), gone from a work-queue input stream
// (acknowledged — published, since a dead letter releases its claim before its ack — or removed), or replaced
// under its sequence (the stream re-created). An unknown answer is "not done": the copy is asked again.
func (w *worker) holderDone(res kvwindow.Outcome) bool {
	p := w.p
	if hd := p.holders.lookup(w.hk, res.HolderSeq, res.HolderStamp); hd != nil {
		t := time.NewTimer(p.cfg.PublishTimeout + p.ackTimeout())
		defer t.Stop()
		select {
		case <-hd.done:
			return hd.published
		case <-t.C:
			return false
		case <-w.ctx.Done():
			return false
		}
	}
	if p.inputKeeps.Load() || res.HolderSeq == 0 {
		return false // a keeping stream: only the claim's record says so
	}
	present, err := p.inputHolds(w.ctx, res.HolderSeq, res.HolderStamp)
	if err != nil {
		p.log.Debug("pipeline: holder of a claim not looked up", "holder_seq", res.HolderSeq, "err", err)
		return false
	}
	return !present
}

// possibleDuplicate reports whether publishing res's claim now could store a second copy of the event: an earlier
// delivery of the envelope held the claim (this one took it over) and may have stored the event without recording
// it, so long ago that the output's duplicate window no longer catches the same Nats-Msg-Id.
func (w *worker) possibleDuplicate(res kvwindow.Outcome) bool {
	if res.FirstClaimed.IsZero() {
		return false
	}
	dup := time.Duration(w.p.outDupWindow.Load())
	if dup <= 0 {
		return false
	}
	// The earlier publish was stored no earlier than the first claim; this one is stored within the publish
	// timeout; a second of slack covers clock differences between replicas.
	return time.Since(res.FirstClaimed)+w.p.cfg.PublishTimeout+time.Second >= dup
}

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

// unpublishable says why out can never be stored by the output stream ("" when it can): its header block over
// JetStream's 64 KiB, or headers and body over the server's maximum payload or the stream's maximum message size.
func (p *Pipeline) unpublishable(out *nats.Msg) string {
	hdr := headerSize(out.Header)
	if hdr > maxHeaderBlock {
		return fmt.Sprintf("the event's header block would be %d bytes, over JetStream's limit of %d", hdr, maxHeaderBlock)
	}
	size := int64(hdr + len(out.Data))
	if mp := p.nc.MaxPayload(); mp > 0 && size > mp {
		return fmt.Sprintf("the event would be %d bytes (headers %d, body %d), over the server's maximum payload of %d",
			size, hdr, len(out.Data), mp)
	}
	if mm := p.outMaxMsgSize.Load(); mm > 0 && size > mm {
		return fmt.Sprintf("the event would be %d bytes (headers %d, body %d), over stream %s's maximum message size of %d",
			size, hdr, len(out.Data), p.cfg.OutputStream, mm)
	}
	return ""
}

// maxHeaderBlock is the largest header block JetStream stores (error 10097 beyond it).
const maxHeaderBlock = 1<<16 - 1

// headerSize is the size of h as the client writes it: "NATS/1.0\r\n", "Name: value\r\n" per value, "\r\n".
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
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
	out := &w.out.msg
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
	vals := &w.out.vals
	vals[i] = value
	w.out.msg.Header[name] = vals[i : i+1 : i+1]
}

// envelopeID appends the envelope's identity, "<input stream>/<seq>/<stamp>": its sequence and the time the input
// stream stored it, so that ids stay distinct when the stream is deleted and re-created (sequences restart).
func (w *worker) envelopeID(b []byte) []byte {
	b = append(b, w.p.cfg.InputStream...)
	b = append(b, '/')
	b = strconv.AppendUint(b, w.e.seq, 10)
	b = append(b, '/')
	return strconv.AppendInt(b, w.e.stamp, 10)
}

// buildOutput builds the unique (keyed) or unkeyed event for the output stream. Every id derives from the envelope
// alone, so every delivery of one envelope publishes under the same Nats-Msg-Id, whatever the claim's revision.
func (w *worker) buildOutput(subject string, in nats.Header, body []byte, keyed bool) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(p.outPrefixDot+subject[len(p.inPrefixDot):], in, body, false)
	if keyed {
		hk := keys.HeaderValue(e.key)
		b := append(w.buf[:0], e.tenant...)
		b = append(b, ':')
		b = append(b, e.source...)
		b = append(b, ':')
		b = append(b, hk...)
		n := len(b)
		b = append(b, '#')
		b = w.envelopeID(b)
		id := string(b)
		w.buf = b[:0]
		w.set(0, HeaderIdempotencyKey, id[:n])
		w.set(1, HeaderMsgID, id)
		w.set(2, HeaderKey, hk)
		w.set(3, HeaderStatus, StatusUnique)
		w.setOrigin()
		return &w.out.msg
	}
	id := w.seqID(p.unkeyedIDPrefix)
	w.set(0, HeaderIdempotencyKey, id)
	w.set(1, HeaderMsgID, id)
	w.set(3, HeaderStatus, StatusUnkeyed)
	w.set(4, HeaderReason, string(e.reason))
	if e.key != "" {
		w.set(2, HeaderKey, keys.HeaderValue(e.key))
	}
	w.setOrigin()
	return &w.out.msg
}

// setOrigin records where an output came from: the input stream and the envelope's sequence in it.
func (w *worker) setOrigin() {
	w.set(5, HeaderInputStream, w.p.cfg.InputStream)
	w.set(6, HeaderInputSeq, strconv.FormatUint(w.e.seq, 10))
}

// buildDuplicate builds the copy of a duplicate for "<duplicates prefix>.<tenant>.<source>".
func (w *worker) buildDuplicate(subject string, in nats.Header, body []byte) *nats.Msg {
	p, e := w.p, &w.e
	w.headers(p.dupPrefixDot+subject[len(p.inPrefixDot):], in, body, false)
	w.set(0, HeaderIdempotencyKey, keys.IdempotencyHeader(e.tenant, e.source, e.key))
	w.set(1, HeaderMsgID, w.seqID(p.dupIDPrefix))
	w.set(2, HeaderKey, keys.HeaderValue(e.key))
	w.set(3, HeaderStatus, StatusDuplicate)
	w.setOrigin()
	return &w.out.msg
}

// buildDeadLetter builds the dead letter for "<dlq prefix>.<reason>".
func (w *worker) buildDeadLetter(subject string, in nats.Header, body []byte, reason, why string) *nats.Msg {
	p := w.p
	out := w.headers(p.cfg.DLQPrefix+"."+reason, in, body, true)
	if controlShaped(in, body) {
		// Never store a dead letter that NATS clients would take for a status message (dlq ls reads them too).
		for _, name := range [...][2]string{{statusHeader, HeaderOriginalStatus}, {descriptionHeader, HeaderOriginalDescription}} {
			if v, ok := out.Header[name[0]]; ok {
				delete(out.Header, name[0])
				out.Header[name[1]] = v
			}
		}
	}
	w.set(0, HeaderError, why)
	w.set(1, HeaderSubject, subject)
	w.set(2, HeaderMsgID, w.seqID(p.dlqIDPrefix))
	w.setOrigin()
	return &w.out.msg
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
	w.setOrigin()
	w.set(4, HeaderTruncated, fmt.Sprintf("sender headers (%d bytes) dropped; body %d of %d bytes kept; the original is message %d of stream %s",
		hdrBytes, len(kept), len(body), w.e.seq, p.cfg.InputStream))
	return &w.out.msg
}

// seqID is prefix followed by the envelope's identity.
func (w *worker) seqID(prefix string) string {
	b := append(w.buf[:0], prefix...)
	b = w.envelopeID(b)
	w.buf = b[:0]
	return string(b)
}
