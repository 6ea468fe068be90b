package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// outMsg is one outbound message with the storage of the header values the worker sets. It belongs to the client
// library until JetStream answered; a worker that stops waiting takes a fresh one.
type outMsg struct {
	msg  nats.Msg
	vals [9]string
}

func newOutMsg() *outMsg { return &outMsg{msg: nats.Msg{Header: make(nats.Header, 16)}} }

// worker executes the protocol's plans for one envelope at a time, reusing its buffers from one to the next.
type worker struct {
	p   *Pipeline
	ctx context.Context
	// durable is ctx without its cancellation: the steps that follow a stored outcome (its record, release and
	// ack) still go out during a shutdown, each bounded by its own timeout.
	durable context.Context
	e       envelope
	out     *outMsg
	buf     []byte
	// ackOut is the ack request, reused: natsreq writes it to the connection before waiting.
	ackOut nats.Msg
}

func (p *Pipeline) newWorker(ctx context.Context) *worker {
	return &worker{p: p, ctx: ctx, durable: context.WithoutCancel(ctx), out: newOutMsg(), buf: make([]byte, 0, 256)}
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

// step is one delivery being handled: the facts the protocol decides on, and what the executor needs to carry
// out the next plan.
type step struct {
	w     *worker
	d     *delivery
	f     protocol.Facts
	claim kvwindow.Claim
	res   kvwindow.Outcome
	hk    string   // holderKey of the envelope (keyed envelopes)
	hd    *holding // this process's record that the delivery holds the claim, while it does
	// rev is the revision of the delivery's last write on the key (its claim, or its record), 0 when unknown.
	rev        uint64
	unstorable string // why the output can never be stored
	claimErr   error
	publishErr error
	copyErr    error // the last publish of the duplicate's copy
	recordErr  error
	// dead and deadWhy are the reason token and readable reason of the dead letter written.
	dead, deadWhy string
}

// handle takes one envelope through inspection and then the protocol's plans, one step at a time, until the plan
// is to stop.
func (w *worker) handle(d *delivery) {
	p := w.p
	p.m.inFlight.Inc()
	defer p.m.inFlight.Dec()
	m := d.msg
	e := &w.e
	p.inspect(e, m.Subject, m.Header, m.Data, d.seq, d.stamp)
	e.received = d.at
	s := step{w: w, d: d}
	s.f = protocol.Facts{Kind: protocol.Keyed, Delivered: d.delivered, Config: protocol.Config{
		ForwardWhenWindowDown: p.cfg.ForwardWhenWindowDown,
		CopyDuplicates:        p.cfg.DuplicatesPrefix != "",
		InputKeeps:            p.inputKeeps.Load(),
		DupWindow:             time.Duration(p.outDupWindow.Load()), // cut at the output's creation once claimed
		PublishTimeout:        p.cfg.PublishTimeout,
	}}
	switch {
	case e.dead != "":
		s.f.Kind = protocol.Malformed
	case e.key == "":
		s.f.Kind = protocol.Unkeyed
	}
	for n := 0; ; n++ {
		s.f.Hold = p.hold(e.received)
		plan := p.decide(s.f)
		if n == maxSteps {
			// A protocol that never stops (a fault of the decision, never of the world): hand the envelope back
			// rather than loop; the redelivery starts again.
			p.log.Error("pipeline: the protocol did not stop; handing the envelope back", "seq", e.seq, "step", plan.String())
			if !s.f.Naked && s.f.Ack == protocol.NotAcked {
				w.nak(d, protocol.NakDelay(d.delivered), p.naks[protocol.NakWindow])
			}
			break
		}
		s.note(plan)
		if plan.Do == protocol.Stop {
			break
		}
		s.do(plan)
	}
	if s.hd != nil {
		p.holders.finish(s.hk, s.hd, s.f.Publish == protocol.PublishStored, s.rev)
	}
}

// maxSteps bounds the steps of one delivery: the longest plan sequence is about a dozen.
const maxSteps = 32

// hold is how long a delivery received at received has been held, against the hold bound (tooOld).
func (p *Pipeline) hold(received time.Duration) protocol.Hold {
	now := p.clock()
	last := time.Duration(p.lastTick.Load())
	return protocol.Hold{
		Held:   now - received,
		Bound:  time.Duration(p.maxHold.Load()),
		Paused: received < time.Duration(p.pauseTill.Load()) || last > 0 && now-last > p.pauseThreshold(),
	}
}

func (s *step) do(plan protocol.Plan) {
	w, p, e, d, m := s.w, s.w.p, &s.w.e, s.d, s.d.msg
	f := &s.f
	switch plan.Do {
	case protocol.Build:
		if plan.Fallback && !plan.Keyed {
			e.reason = contract.ReasonWindowUnavailable
		}
		out := w.buildOutput(m.Header, m.Data, plan.Keyed)
		f.Output.Built = protocol.BuiltUnkeyed
		if plan.Keyed {
			f.Output.Built = protocol.BuiltKeyed
		}
		s.unstorable = p.unpublishable(out)
		f.Output.Unstorable = s.unstorable != ""
	case protocol.Claim:
		s.doClaim()
	case protocol.WaitHolder:
		f.Holder = s.waitHolder()
	case protocol.LookupInput:
		present, err := p.inputHolds(w.ctx, s.res.HolderSeq, s.res.HolderStamp)
		switch {
		case err != nil:
			p.log.Debug("pipeline: holder of a claim not looked up", "holder_seq", s.res.HolderSeq, "err", err)
			f.Input = protocol.InputFailed
		case present:
			f.Input = protocol.InputPresent
		default:
			f.Input = protocol.InputGone
		}
	case protocol.Recheck:
		entry, found, err := p.cfg.Window.Get(w.ctx, e.tenant, e.source, e.key)
		switch {
		case err != nil:
			p.log.Debug("pipeline: claim of a copy not read again", "seq", e.seq, "key", e.key, "err", err)
			f.Recheck = protocol.RecheckFailed
		case found && entry.Revision == s.res.Revision:
			f.Recheck = protocol.StillHeld
		default:
			f.Recheck = protocol.NoLongerHeld
		}
	case protocol.Publish:
		if plan.Mark&protocol.PossibleDuplicate != 0 {
			w.set(7, contract.HeaderPossibleDuplicate, "true")
		}
		out := &w.out.msg
		sent := p.clock()
		err := w.publish(out)
		f.Publish = w.publishResult(err, sent)
		s.publishErr = err
		if err == nil && p.log.Enabled(w.ctx, slog.LevelDebug) {
			p.log.Debug("pipeline: forwarded", "seq", e.seq, "subject", out.Subject, "key", e.key, "reason", string(e.reason),
				"msg_id", out.Header.Get(contract.HeaderMsgID))
		}
	case protocol.PublishCopy:
		out := w.buildDuplicate(m.Header, m.Data)
		sent := p.clock()
		err := w.publish(out)
		f.Copy = w.publishResult(err, sent)
		s.copyErr = err
	case protocol.DeadLetter:
		s.dead, s.deadWhy = s.deadReason(plan.Dead)
		f.DeadLetter = w.deadLetter(d, s.dead, s.deadWhy)
	case protocol.Release:
		ok, err := p.cfg.Window.Release(w.durable, s.claim, s.rev, plan.MayBeStored)
		switch {
		case err != nil:
			p.log.Warn("pipeline: claim of a dead-lettered event not released; handing the envelope back",
				"seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "err", err)
			p.windowDown(err)
			f.Release = protocol.ReleaseFailed
		case ok:
			f.Release = protocol.Released
		default:
			f.Release = protocol.ReleaseMoved
		}
	case protocol.Record:
		newRev, ok, err := p.cfg.Window.MarkPublished(w.durable, s.claim, s.rev, s.res.FirstClaimed)
		s.rev = 0
		switch {
		case err != nil:
			p.windowDown(err)
			s.recordErr = err
			f.Record = protocol.RecordFailed
		case ok:
			s.rev = newRev
			f.Record = protocol.Recorded
		default:
			f.Record = protocol.RecordMoved
		}
	case protocol.Ack:
		if w.ack(d) {
			f.Ack = protocol.AckConfirmed
		} else {
			f.Ack = protocol.AckUnconfirmed
		}
		s.count(plan.Count)
	case protocol.Nak:
		w.nak(d, plan.Delay, p.nakCounter(plan.Nak))
		f.Naked = true
	default:
		p.log.Error("pipeline: the protocol asked for an unknown step; handing the envelope back", "step", plan.Do)
		w.nak(d, protocol.NakDelay(d.delivered), p.naks[protocol.NakWindow])
		f.Naked = true
	}
}

// doClaim claims the envelope's key and writes the window's answer into the facts. A delivery that wins or takes
// over the claim is made known to this process's other workers while it holds it (holders).
func (s *step) doClaim() {
	w, p, e, d := s.w, s.w.p, &s.w.e, s.d
	f := &s.f
	start := time.Now()
	// The claim's TTL starts when it is written, after now: a holding here expires no later than its claim.
	now, ttl := p.clock(), p.ttl(e.src.spec)
	s.hk = holderKey(e.tenant, e.source, e.key)
	s.claim = kvwindow.Claim{
		Tenant: e.tenant, Source: e.source, Key: e.key, TTL: ttl,
		Claimant: kvwindow.Claimant{Seq: e.seq, Stamp: e.stamp},
		Delivery: kvwindow.Delivery{Consumer: p.consumerCreated.Load(), Count: d.delivered},
	}
	// A copy of an event this process published a moment ago is decided by the create's refusal alone.
	res, err := p.cfg.Window.Claim(w.ctx, s.claim, p.holders.known(s.hk, now))
	p.m.claimDuration.Observe(time.Since(start).Seconds())
	s.res, s.claimErr = res, err
	if err != nil {
		f.Claim.Status = claimFailed(w.ctx.Err() != nil, err)
		if f.Claim.Status == protocol.ClaimLost || f.Claim.Status == protocol.ClaimUnavailable {
			p.windowDown(err)
		}
		return
	}
	p.claimUp()
	f.Claim = protocol.ClaimResult{Published: res.Published, HolderKnown: res.HolderSeq != 0, MayBeStored: res.MayBeStored}
	if !res.FirstClaimed.IsZero() {
		now := time.Now() // the claim's age and the output's at one instant: dupWindowReach compares them
		f.Claim.FirstClaimAge, f.Claim.AgeKnown = now.Sub(res.FirstClaimed), true
		f.Config.DupWindow = dupWindowReach(f.Config.DupWindow, p.outputAge(now), p.cfg.PublishTimeout)
	}
	f.Claim.Status = protocol.ClaimUnknown
	if uint(res.Status) < uint(len(claimStatus)) && res.Status != 0 {
		f.Claim.Status = claimStatus[res.Status]
	}
	if res.Status == kvwindow.Won || res.Status == kvwindow.Owned {
		s.rev = res.Revision
		if !res.Published {
			s.hd = p.holders.begin(s.hk, e.seq, e.stamp, now+ttl)
		}
	}
}

var claimStatus = [...]protocol.ClaimStatus{kvwindow.Won: protocol.Won, kvwindow.Owned: protocol.Owned,
	kvwindow.Duplicate: protocol.Duplicate, kvwindow.Stale: protocol.Stale, kvwindow.DeadLettered: protocol.DeadLettered}

// waitHolder waits, bounded, for the holder of a Duplicate's claim if one of this process's workers holds it.
func (s *step) waitHolder() protocol.HolderResult {
	w, p := s.w, s.w.p
	hd, done := p.holders.lookup(s.hk, s.res.HolderSeq, s.res.HolderStamp)
	if hd == nil {
		return protocol.HolderNotHere
	}
	t := time.NewTimer(p.cfg.PublishTimeout + p.ackTimeout())
	defer t.Stop()
	select {
	case <-done:
		if hd.published {
			return protocol.HolderPublished
		}
		return protocol.HolderUnpublished
	case <-t.C:
	case <-w.ctx.Done():
	}
	return protocol.HolderTimedOut
}

// deadReason is the dead-letter reason token and readable reason of a plan's dead letter.
func (s *step) deadReason(why protocol.Dead) (string, string) {
	e := &s.w.e
	switch why {
	case protocol.DeadMalformed:
		return e.dead, e.deadErr
	case protocol.DeadBadClaim:
		return contract.DeadBadClaim, fmt.Sprint(s.claimErr)
	}
	if s.unstorable != "" {
		return contract.DeadOutputReject, s.unstorable
	}
	return contract.DeadOutputReject, fmt.Sprintf("output stream %s refused the event: %v", s.w.p.cfg.OutputStream, s.publishErr)
}

func (s *step) count(c protocol.Count) {
	p, e := s.w.p, &s.w.e
	if c != 0 && int(c) < len(e.src.outcomes) {
		e.src.outcomes[c].Inc()
	}
	switch c {
	case protocol.CountUnkeyed:
		e.src.reason(e.reason).Inc()
	case protocol.CountDuplicate:
		if p.log.Enabled(s.w.ctx, slog.LevelDebug) {
			p.log.Debug("pipeline: duplicate", "seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key)
		}
	case protocol.CountDeadLetter:
		// seq is the input sequence, as in every line of the pipeline; dlq ls shows it as INPUT-SEQ.
		p.log.Warn("pipeline: dead letter", "seq", e.seq, "subject", s.d.msg.Subject, "reason", s.dead, "error", s.deadWhy,
			"find", "dedupeworker dlq ls --reason "+s.dead)
	}
}

// note logs and counts what a plan says beside its step.
func (s *step) note(plan protocol.Plan) {
	p, e, d := s.w.p, &s.w.e, s.d
	switch plan.Do {
	case protocol.Stop:
		switch plan.Stop {
		case protocol.StaleDelivery:
			p.m.stale.Inc()
			p.log.Debug("pipeline: stale delivery skipped: a later delivery of the envelope holds its claim",
				"seq", e.seq, "delivered", d.delivered, "tenant", e.tenant, "source", e.source)
		case protocol.Superseded:
			p.m.stale.Inc()
			p.log.Warn("pipeline: dead letter stored, but a later delivery of the envelope holds its claim now; leaving the envelope to it",
				"seq", e.seq, "delivered", d.delivered, "tenant", e.tenant, "source", e.source, "key", e.key)
		}
	case protocol.Nak:
		if plan.Nak != protocol.NakHolder {
			break
		}
		if ok, n := p.holderLog.allow(); ok {
			p.log.Info("pipeline: copy handed back until the envelope holding its claim is published", "seq", e.seq,
				"holder_seq", s.res.HolderSeq, "tenant", e.tenant, "source", e.source, "key", e.key, "since_last_log", n)
		}
	}
	switch plan.Note {
	case protocol.NotePossibleDuplicate:
		p.m.possibleDuplicates.Inc()
		p.log.Warn("pipeline: publishing a possible second copy: an earlier delivery of this envelope may have stored it "+
			"longer ago than the output's duplicate window reaches (its window, or its creation when it was created again "+
			"since)", "seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "first_claimed", s.res.FirstClaimed,
			"duplicate_window", time.Duration(p.outDupWindow.Load()), "window_reach", s.f.Config.DupWindow)
	case protocol.NoteStoredTwice:
		p.m.possibleDuplicates.Inc()
		p.log.Warn("pipeline: published after another delivery took the claim over; the output may hold this event twice",
			"seq", e.seq, "tenant", e.tenant, "source", e.source, "key", e.key, "why", p.tooOld(e.received))
	case protocol.NoteMovedOn:
		p.log.Debug("pipeline: published, but the claim had moved on before the publish was recorded", "seq", e.seq, "key", e.key)
	case protocol.NoteUnrecorded:
		p.log.Warn("pipeline: publish not recorded in its claim after an unconfirmed ack; a redelivery later than the output's "+
			"duplicate window would be published again, marked as a possible duplicate", "seq", e.seq, "key", e.key, "err", s.recordErr)
	case protocol.NoteCopyRefused:
		p.log.Warn("pipeline: duplicate copy refused by the output stream; counted only", "seq", e.seq,
			"subject", contract.Republish(p.cfg.DuplicatesPrefix, e.tail), "err", s.copyErr)
	case protocol.NoteUnknownStatus:
		p.log.Error("pipeline: window returned an unknown claim status", "status", s.res.Status)
	case protocol.NoteHeld:
		if ok, n := p.heldLog.allow(); ok {
			p.log.Warn("pipeline: delivery handed back instead of published", "seq", e.seq, "why", p.tooOld(e.received), "since_last_log", n)
		}
	}
}

func (p *Pipeline) nakCounter(r protocol.NakReason) prometheus.Counter {
	if int(r) < len(p.naks) {
		return p.naks[r]
	}
	return p.naks[protocol.NakWindow]
}

// claimFailed says what a claim that returned err tells the protocol (protocol.ClaimStatus).
func claimFailed(cancelled bool, err error) protocol.ClaimStatus {
	switch {
	case cancelled:
		return protocol.ClaimCancelled
	case errors.Is(err, kvwindow.ErrInvalid):
		return protocol.ClaimInvalid
	case errors.Is(err, kvwindow.ErrWindowLost), errors.Is(err, kvwindow.ErrAgeLimit), errors.Is(err, kvwindow.ErrEvicting):
		return protocol.ClaimLost
	default:
		return protocol.ClaimUnavailable
	}
}
