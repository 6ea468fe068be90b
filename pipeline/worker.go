package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

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
	if hd, done := p.holders.lookup(w.hk, res.HolderSeq, res.HolderStamp); hd != nil {
		t := time.NewTimer(p.cfg.PublishTimeout + p.ackTimeout())
		defer t.Stop()
		select {
		case <-done:
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
