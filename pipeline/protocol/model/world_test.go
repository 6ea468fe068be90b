package model

import (
	"fmt"
	"strings"
)

// Array sizes of the state: the largest bound the model explores.
const (
	maxEnv = 3 // copies of the one event
	maxDel = 4 // deliveries of each copy, over all consumers
	maxRep = 2 // replicas
)

// kvKey is the event's key in the window bucket.
type kvKey struct {
	Kind  uint8 // keyEmpty, keyMarker, keyClaim
	Rev   uint8 // the key's last revision (0 when empty)
	Env   uint8 // claim: the claimant
	Gen   uint8 // claim: the delivery holding it: consumer generation
	Count uint8 // and delivery count
	First uint8 // claim: the epoch the envelope first claimed the key (kept across takeovers and records)
	Pub   bool  // claim: the publish is recorded
	// RelEnv, with a marker: the envelope whose holder released the claim, plus one (0: an anonymous marker, a
	// TTL expiry's). RelStored, with a marker: it says the event may be stored (the holder took the claim over);
	// with a claim: it was made over such a marker (kept across takeovers and records).
	RelEnv    uint8
	RelStored bool
}

const (
	keyEmpty = iota
	keyMarker
	keyClaim
)

// envelope is one copy of the event in the input stream and at its consumer.
type envelope struct {
	Present  bool  // still in the work-queue input stream (not acked)
	Out      bool  // delivered, its ack wait running
	Count    uint8 // the current consumer's delivery count
	Total    uint8 // deliveries over all consumers (the bound)
	Stored   bool  // its Nats-Msg-Id was stored in the output stream (ever)
	DLQ      bool  // dead-lettered
	DupAcked bool  // acked as a duplicate of another copy
	// Excused: a store of it may have been unknown to every delivery (its PubAck lost, the process dead or held
	// for a duplicate window between the PubAck and its ack, or its record failed): the condition of
	// docs/failures.md#when-never-published-twice-holds for a second copy marked Dedupe-Possible-Duplicate.
	Excused bool
}

// handler is one delivery being handled by a replica's worker.
type handler struct {
	On       bool
	Rep      uint8
	Gen      uint8 // consumer generation the delivery came from
	Count    uint8 // its delivery count there
	Epoch    uint8 // the epoch it was received in
	Paused   bool  // its process was paused (frozen) since it was received
	InFlight bool  // a publish handed to the client library, not yet answered
	Marked   bool  // that publish is marked Dedupe-Possible-Duplicate
	Rev      uint8 // the revision of the claim it holds (Won, Owned; after a record, the record's), or found (Duplicate)
	Holder   uint8 // Duplicate: the claimant holding the key
	F        Facts
}

// holding is a replica's in-memory record of the claim one of its deliveries holds (pipeline/holders.go).
type holding struct {
	On        bool
	Env, Slot uint8
	Finished  bool // finished and published (an unpublished finish forgets it)
}

type replica struct {
	Frozen bool
	Hold   holding
}

// State is the whole world. It is comparable: the explorer's visited set holds it as a map key.
type State struct {
	Key     kvKey
	RevCtr  uint8 // the bucket's last sequence
	Gen     uint8 // the consumer's generation (deleted and re-created)
	Epoch   uint8 // output duplicate windows elapsed
	Faults  uint8
	Lowered bool // the output's limits were lowered: copy A no longer fits
	// Win: the Nats-Msg-Ids the output's duplicate window remembers, a bit per envelope (with Config.ForwardOwnID,
	// a forwarded publish's own id is the envelope's bit shifted by fwdID).
	Win  uint8
	Life uint8 // envelopes stored by a keyed publish (while the claim lives: see Expired)
	// Fwd: envelopes stored by a publish forwarded unkeyed while the window could not answer (Config.Forward).
	Fwd uint8
	// Expired: a claim's TTL ran out. A copy admitted after it may be published again (the TTL is the dedupe
	// window by definition): no double is counted from then on.
	Expired bool
	E       [maxEnv]envelope
	H       [maxEnv * maxDel]handler
	R       [maxRep]replica
}

// Config is the bound of one exploration.
type Config struct {
	Envelopes  int  // copies of one event (1–3); copy A is the large one the lowered limits refuse
	Deliveries int  // deliveries of each copy (1–4)
	Replicas   int  // 1–2
	Faults     int  // faults in one interleaving (see the fault steps)
	InputKeeps bool // the input stream keeps acknowledged envelopes (limits retention) rather than a work queue
	// NoFence: a replica frozen with a publish handed to its client library sends it when it resumes. With the
	// fence (the default) the connection of a paused process is dropped and nothing buffered is sent.
	NoFence bool
	// NoTakeover is the window before deliveries were ordered: every delivery of the claimant gets Owned with the
	// claim's revision as it is, none is Stale.
	NoTakeover bool
	// AckWaitFree: ack-wait expiries (a stalled delivery redelivered) are free; else each costs a fault.
	AckWaitFree bool
	// Forward is DEDUPE_FORWARD_WHEN_WINDOW_DOWN: a delivery whose claim the window did not answer forwards the
	// envelope unkeyed, under its keyed Nats-Msg-Id.
	Forward bool
	// ForwardOwnID is the output before forwarded events kept the keyed Nats-Msg-Id: a forwarded publish goes
	// out under an id of its own (msg/<envelope>), which the duplicate window does not collapse with the keyed one.
	ForwardOwnID bool
}

func (c Config) String() string {
	s := fmt.Sprintf("copies=%d deliveries=%d replicas=%d faults=%d input=%s fence=%v ackwait=%s forward=%v",
		c.Envelopes, c.Deliveries, c.Replicas, c.Faults, map[bool]string{false: "workqueue", true: "keeps"}[c.InputKeeps],
		!c.NoFence, map[bool]string{false: "fault", true: "free"}[c.AckWaitFree], c.Forward)
	if c.ForwardOwnID {
		s += " (own id)"
	}
	return s
}

// fwdID shifts an envelope's bit in State.Win to the bit of its forwarded publish's own id (Config.ForwardOwnID).
const fwdID = 4

// Step is one transition of the world.
type Step struct {
	Op, A, V uint8
}

const (
	opDeliver  = iota + 1 // A: envelope*maxRep + replica
	opAckWait             // A: envelope
	opHandle              // A: handler slot, V: variant (0 as asked, 1 failed not applied, 2 failed applied)
	opFlush               // A: slot, V: 0 stored/collapsed, 1 stored but PubAck lost, 2 refused for now
	opExpire              // the claim's TTL runs out
	opTime                // a duplicate window elapses
	opLower               // the output's limits are lowered
	opRecreate            // the consumer is deleted and re-created
	opFreeze              // A: replica
	opThaw                // A: replica
	opCrash               // A: replica (restarted at once, with nothing in memory)
)

func envName(e uint8) string { return string(rune('A' + e)) }

func slotName(s *State, slot int) string {
	h := &s.H[slot]
	return fmt.Sprintf("%s#%d(r%d)", envName(uint8(slot/maxDel)), slot%maxDel+1, h.Rep)
}

// tooOld is the fact the pause detector and the hold bound give a delivery now.
func (s *State) tooOld(h *handler) bool { return h.Paused || h.Epoch < s.Epoch }

func (s *State) facts(slot int) Facts {
	h := &s.H[slot]
	f := h.F
	f.TooOld = s.tooOld(h)
	return f
}

// steps appends the enabled steps of s.
func (s *State) steps(c *Config, d Decider, out []Step) []Step {
	canFault := int(s.Faults) < c.Faults
	for e := 0; e < c.Envelopes; e++ {
		ev := &s.E[e]
		if ev.Present && !ev.Out && int(ev.Total) < c.Deliveries {
			for r := 0; r < c.Replicas; r++ {
				if !s.R[r].Frozen {
					out = append(out, Step{Op: opDeliver, A: uint8(e*maxRep + r)})
				}
			}
		}
		if ev.Out && (c.AckWaitFree || canFault) {
			out = append(out, Step{Op: opAckWait, A: uint8(e)})
		}
	}
	for slot := range s.H {
		h := &s.H[slot]
		if !h.On || s.R[h.Rep].Frozen {
			continue
		}
		if h.InFlight {
			out = append(out, Step{Op: opFlush, A: uint8(slot)})
			if canFault {
				if !(s.Lowered && slot/maxDel == 0) {
					out = append(out, Step{Op: opFlush, A: uint8(slot), V: 1})
				}
				out = append(out, Step{Op: opFlush, A: uint8(slot), V: 2})
			}
			continue
		}
		out = append(out, Step{Op: opHandle, A: uint8(slot)})
		if canFault {
			switch a := s.next(d, slot); a.Kind {
			case Claim, Record, Release, Ack:
				out = append(out, Step{Op: opHandle, A: uint8(slot), V: 1}, Step{Op: opHandle, A: uint8(slot), V: 2})
			case DeadLetter, Recheck:
				out = append(out, Step{Op: opHandle, A: uint8(slot), V: 1})
			}
		}
	}
	for r := 0; r < c.Replicas; r++ {
		if s.R[r].Frozen {
			out = append(out, Step{Op: opThaw, A: uint8(r)})
		}
	}
	if !canFault {
		return out
	}
	if s.Key.Kind == keyClaim {
		out = append(out, Step{Op: opExpire})
	}
	if !s.publishing() {
		out = append(out, Step{Op: opTime})
	}
	if !s.Lowered {
		out = append(out, Step{Op: opLower})
	}
	out = append(out, Step{Op: opRecreate})
	for r := 0; r < c.Replicas; r++ {
		if !s.R[r].Frozen {
			out = append(out, Step{Op: opFreeze, A: uint8(r)}, Step{Op: opCrash, A: uint8(r)})
		}
	}
	return out
}

// publishing reports whether a running replica has a publish in flight: it is answered within the publish
// timeout, far inside a duplicate window, so no window passes meanwhile (a frozen replica's may wait).
func (s *State) publishing() bool {
	for i := range s.H {
		if h := &s.H[i]; h.On && h.InFlight && !s.R[h.Rep].Frozen {
			return true
		}
	}
	return false
}

// next is the action the delivery in slot takes next, with an inspection (which changes nothing in the world)
// made in the same step as the action after it.
func (s *State) next(d Decider, slot int) Action {
	a := d.Next(s.facts(slot))
	if a.Kind == Inspect {
		f := s.facts(slot)
		s.inspect(&f, slot, a)
		a = d.Next(f)
	}
	return a
}

// inspect fills in what building the output (keyed, or unkeyed to forward it) finds: whether the output stream can
// take it. Copy A is the large one: once the limits are lowered, neither of its outputs fits.
func (s *State) inspect(f *Facts, slot int, a Action) {
	if a.Unkeyed {
		f.Forwarded = true
	} else {
		f.Inspected = true
	}
	f.Unpublishable = s.Lowered && slot/maxDel == 0
}

// Violation is an invariant broken by the last step.
type Violation struct {
	Rule  string
	Trace []string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "violation: %s\n", v.Rule)
	for i, l := range v.Trace {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, l)
	}
	return b.String()
}

// world applies steps; log, when set, receives a line per step (traces).
type world struct {
	c   *Config
	d   Decider
	log func(string)
}

func (w *world) say(format string, args ...any) {
	if w.log != nil {
		w.log(fmt.Sprintf(format, args...))
	}
}

func (s *State) fault() { s.Faults++ }

// apply makes step st in s and returns the rule it broke ("" when none).
func (w *world) apply(s *State, st Step) string {
	switch st.Op {
	case opDeliver:
		e, r := int(st.A)/maxRep, int(st.A)%maxRep
		ev := &s.E[e]
		ev.Out = true
		ev.Count++
		ev.Total++
		slot := e*maxDel + int(ev.Total) - 1
		s.H[slot] = handler{On: true, Rep: uint8(r), Gen: s.Gen, Count: ev.Count, Epoch: s.Epoch,
			F: Facts{First: ev.Count == 1, InputKeeps: w.c.InputKeeps, Forward: w.c.Forward}}
		w.say("deliver %s to replica %d (consumer %d, delivery %d)", envName(uint8(e)), r, s.Gen, ev.Count)
	case opAckWait:
		s.E[st.A].Out = false
		if !w.c.AckWaitFree {
			s.fault()
		}
		w.say("ack wait of %s's delivery runs out: it may be delivered again", envName(st.A))
	case opHandle:
		return w.handle(s, int(st.A), st.V)
	case opFlush:
		return w.flush(s, int(st.A), st.V)
	case opExpire:
		s.fault()
		s.RevCtr++
		s.Key = kvKey{Kind: keyMarker, Rev: s.RevCtr}
		s.Expired = true
		w.say("FAULT the claim's TTL runs out (marker rev %d)", s.RevCtr)
	case opTime:
		s.fault()
		s.Epoch++
		s.Win = 0
		for i := range s.H {
			// A delivery between a stored publish and its confirmed ack or record for a whole duplicate window:
			// a redelivery meanwhile cannot tell whether the event was stored.
			if h := &s.H[i]; h.On && h.F.Publish == OK && h.F.Ack != OK && h.F.Record != OK {
				s.E[i/maxDel].Excused = true
			}
		}
		w.say("FAULT a whole duplicate window passes (epoch %d): the output forgets the ids it stored, every delivery held since is past the hold bound", s.Epoch)
	case opLower:
		s.fault()
		s.Lowered = true
		w.say("FAULT the output's limits are lowered: copy A no longer fits")
	case opRecreate:
		s.fault()
		s.Gen++
		for e := range s.E {
			s.E[e].Out, s.E[e].Count = false, 0
		}
		w.say("FAULT the consumer is deleted and re-created (consumer %d): pending envelopes are delivered again from count 1", s.Gen)
	case opFreeze:
		s.fault()
		s.R[st.A].Frozen = true
		w.say("FAULT replica %d freezes", st.A)
	case opThaw:
		r := st.A
		s.R[r].Frozen = false
		w.say("replica %d resumes", r)
		for slot := range s.H {
			h := &s.H[slot]
			if !h.On || h.Rep != r {
				continue
			}
			h.Paused = true
			if h.InFlight && !w.c.NoFence {
				h.InFlight, h.F.Publish = false, Failed
				w.say("  %s's publish, handed to the client before the freeze, is dropped with the fenced connection", slotName(s, slot))
			}
		}
	case opCrash:
		s.fault()
		r := st.A
		for slot := range s.H {
			if h := &s.H[slot]; h.On && h.Rep == r {
				if h.F.Publish == OK && h.F.Ack != OK && h.F.Record != OK {
					s.E[slot/maxDel].Excused = true
				}
				s.H[slot] = handler{}
			}
		}
		s.R[r] = replica{}
		w.say("FAULT replica %d crashes and restarts: its deliveries and what it held in memory are gone", r)
	}
	return ""
}

// flush sends a publish the client library holds to the output stream.
func (w *world) flush(s *State, slot int, v uint8) string {
	h := &s.H[slot]
	e := uint8(slot / maxDel)
	h.InFlight = false
	name := slotName(s, slot)
	if v == 2 {
		s.fault()
		h.F.Publish = Failed
		w.say("FAULT %s's publish is refused for now (output unavailable)", name)
		return ""
	}
	if s.Lowered && e == 0 {
		h.F.Publish = Refused
		w.say("%s's publish is refused: over the output's lowered limits", name)
		return ""
	}
	bit := uint8(1) << e
	fwd := h.F.Forwarded
	id := bit
	if fwd && w.c.ForwardOwnID {
		id = bit << fwdID
	}
	rule := ""
	if s.Win&id != 0 {
		w.say("%s's publish is collapsed by the duplicate window (same Nats-Msg-Id)", name)
	} else {
		switch {
		case (s.Life|s.Fwd) == 0 || s.Expired:
		case s.Win&(bit|bit<<fwdID) != 0:
			// The same envelope, stored within the window under another Nats-Msg-Id: never excused.
			rule = fmt.Sprintf("%s: %s stored (forwarded=%v) within the duplicate window of its envelope's earlier store, under another Nats-Msg-Id", RuleTwice, name, fwd)
		case fwd:
			// Forwarded without a claim: dedupe is off for it, the setting's cost.
			rule = fmt.Sprintf("%s: %s stored forwarded (unkeyed) after %s", RuleTwiceForwarded, name, s.storedNames(s.Life|s.Fwd))
		case s.Life == 0:
			// Only forwarded stores came before this keyed one.
			rule = fmt.Sprintf("%s: %s stored (marked=%v) after %s, forwarded", RuleTwiceForwarded, name, h.Marked, s.storedNames(s.Fwd))
		case h.Marked && h.F.MayBeStored && s.Life&bit == 0:
			// Admitted over the release marker of a holder that may have stored the event: visible, not silent.
		case h.Marked && s.Life == bit && s.E[e].Excused:
		case h.Marked && s.Life == bit:
			rule = fmt.Sprintf("%s: %s stored marked, but the delivery that stored it before knew it had (its PubAck came, and its ack was confirmed or its record written, or the record was never tried)", RuleMarkedUnexcused, name)
		case s.Life&^bit != 0 && s.storedAndDeadLettered(s.Life&^bit):
			rule = fmt.Sprintf("%s: %s stored (marked=%v) after %s, which was stored, then dead-lettered by a later delivery that released the claim", RuleTwiceAfterDeadLetter, name, h.Marked, lifeNames(s.Life))
		default:
			rule = fmt.Sprintf("%s: %s stored (marked=%v) after %s", RuleTwice, name, h.Marked, lifeNames(s.Life))
		}
		if fwd {
			s.Fwd |= bit
		} else {
			s.Life |= bit
		}
		s.Win |= id
		s.E[e].Stored = true
		mark := ""
		switch {
		case fwd:
			mark = ", forwarded unkeyed"
		case h.Marked:
			mark = ", marked Dedupe-Possible-Duplicate"
		}
		w.say("%s's publish is stored in the output%s", name, mark)
	}
	h.F.Publish = OK
	if v == 1 {
		s.fault()
		h.F.Publish = Failed
		s.E[e].Excused = true
		w.say("FAULT  … but its PubAck is lost")
	}
	return rule
}

// storedAndDeadLettered reports whether an envelope of mask m was both stored and dead-lettered.
func (s *State) storedAndDeadLettered(m uint8) bool {
	for e := range s.E {
		if m&(1<<e) != 0 && s.E[e].Stored && s.E[e].DLQ {
			return true
		}
	}
	return false
}

// The invariants (docs/model.md says what each checks), as the first words of a violation.
const (
	RuleLost                 = "lost"
	RuleTwice                = "published twice while its claim lives"
	RuleMarkedUnexcused      = "published twice, marked, outside the stated conditions (docs/failures.md)"
	RuleTwiceAfterDeadLetter = "published twice after a stored event was dead-lettered and released"
	RuleNoOutcome            = "acked without an outcome"
	// RuleTwiceForwarded is excused: a second store of the event in which a publish forwarded while the window
	// could not answer (Config.Forward) took part, the one stored second or an earlier one. Dedupe is off for what
	// is forwarded; only a second store of the same envelope within the duplicate window would be a fault
	// (RuleTwice).
	RuleTwiceForwarded = "published twice by forwarding while the window was down (excused)"
)

// Excused reports whether a rule a step broke is a cost the deployment chose rather than a violation: it is
// counted apart (Report.Excused) and the exploration goes on past it.
func Excused(rule string) bool { return strings.HasPrefix(rule, RuleTwiceForwarded) }

// storedNames names the envelopes of mask m, those stored forwarded (State.Fwd) marked so.
func (s *State) storedNames(m uint8) string {
	var n []string
	for e := uint8(0); e < maxEnv; e++ {
		if m&(1<<e) == 0 {
			continue
		}
		switch {
		case s.Fwd&(1<<e) != 0 && s.Life&(1<<e) != 0:
			n = append(n, envName(e)+" (keyed and forwarded)")
		case s.Fwd&(1<<e) != 0:
			n = append(n, envName(e)+" (forwarded)")
		default:
			n = append(n, envName(e))
		}
	}
	return strings.Join(n, ",")
}

func lifeNames(m uint8) string {
	var n []string
	for e := uint8(0); e < maxEnv; e++ {
		if m&(1<<e) != 0 {
			n = append(n, envName(e))
		}
	}
	return strings.Join(n, ",")
}

// handle makes the delivery in slot take its next step, as the decider says; v picks a failed variant of an effect.
func (w *world) handle(s *State, slot int, v uint8) string {
	h := &s.H[slot]
	a := w.d.Next(s.facts(slot))
	name := slotName(s, slot)
	if v != 0 {
		s.fault()
	}
	if a.Kind == Inspect {
		s.inspect(&h.F, slot, a)
		if a.Unkeyed {
			w.say("%s builds the unkeyed output to forward (the window did not answer its claim): unpublishable=%v", name, h.F.Unpublishable)
		} else {
			w.say("%s inspected: unpublishable=%v", name, h.F.Unpublishable)
		}
		a = w.d.Next(s.facts(slot))
	}
	rule := w.do(s, slot, v, a)
	// A delivery whose next step is to end (Stop) or to be handed back (Nak) takes it in the same step: an end
	// changes only its replica's memory, and a NAK only lets the envelope be delivered again, which a later
	// delivery step does anyway.
	if h.On && !h.InFlight {
		if a := w.d.Next(s.facts(slot)); a.Kind == Stop || a.Kind == Nak {
			w.do(s, slot, 0, a)
		}
	}
	return rule
}

func (w *world) do(s *State, slot int, v uint8, a Action) string {
	h := &s.H[slot]
	e := uint8(slot / maxDel)
	ev := &s.E[e]
	name := slotName(s, slot)
	switch a.Kind {
	case Claim:
		w.claim(s, slot, v)
	case Recheck:
		w.recheck(s, slot, v)
	case WaitHolder:
		r := &s.R[h.Rep]
		switch {
		case !r.Hold.On || r.Hold.Env != h.Holder:
			h.F.Holder = HolderNotHere
		case r.Hold.Finished:
			h.F.Holder = HolderPublished
		default:
			// Not finished: the wait timed out (while it waits, the delivery is simply not scheduled, so the
			// holder's end comes first in the interleavings where the wait succeeds).
			h.F.Holder = HolderTimedOut
		}
		w.say("%s waits for holder %s in its replica's memory: %s", name, envName(h.Holder),
			[...]string{"", "not here", "published", "unpublished", "not finished in time"}[h.F.Holder])
	case LookupInput:
		h.F.Input = InputGone
		if s.E[h.Holder].Present {
			h.F.Input = InputPresent
		}
		w.say("%s looks up holder %s in INGEST: present=%v", name, envName(h.Holder), s.E[h.Holder].Present)
	case Publish:
		h.InFlight, h.Marked = true, a.Marked
		w.say("%s hands its publish to the client library (marked=%v)", name, a.Marked)
	case Record:
		applies := s.Key.Kind == keyClaim && s.Key.Rev == h.Rev
		if applies && v != 1 {
			s.RevCtr++
			s.Key.Pub, s.Key.Rev = true, s.RevCtr
		}
		switch {
		case v != 0:
			h.F.Record = Failed
			s.E[e].Excused = s.E[e].Excused || h.F.Publish == OK && h.F.Ack != OK
			w.say("FAULT %s records the publish at rev %d: no answer (applied=%v)", name, h.Rev, applies && v == 2)
		case applies:
			h.Rev = s.RevCtr
			h.F.Record = OK
			w.say("%s records the publish in its claim (rev %d)", name, h.Rev)
		default:
			// A later delivery took the claim over: the record did not land, and that delivery may be held
			// and handed back without publishing.
			h.F.Record = Moved
			s.E[e].Excused = s.E[e].Excused || h.F.Publish == OK && h.F.Ack != OK
			w.say("%s records the publish at rev %d: the key moved on", name, h.Rev)
		}
	case Release:
		applies := s.Key.Kind == keyClaim && s.Key.Rev == h.Rev
		if applies && v != 1 {
			s.RevCtr++
			s.Key = kvKey{Kind: keyMarker, Rev: s.RevCtr}
			if a.Named {
				s.Key.RelEnv, s.Key.RelStored = e+1, a.MayBeStored
			}
		}
		switch {
		case v != 0:
			h.F.Release = Failed
			w.say("FAULT %s releases the claim at rev %d: no answer (applied=%v)", name, h.Rev, applies && v == 2)
		case applies:
			h.F.Release = OK
			w.say("%s releases the claim (rev %d; marker named=%v, may be stored=%v)", name, h.Rev, a.Named, a.MayBeStored)
		default:
			h.F.Release = Moved
			w.say("%s releases the claim at rev %d: the key moved on (release false)", name, h.Rev)
		}
	case DeadLetter:
		if v != 0 {
			h.F.DeadLetter = Failed
			w.say("FAULT %s's dead letter is not stored", name)
		} else {
			ev.DLQ = true
			h.F.DeadLetter = OK
			w.say("%s is dead-lettered", name)
		}
	case Ack:
		return w.ack(s, slot, v)
	case Nak:
		if h.Gen == s.Gen && ev.Present {
			ev.Out = false
		}
		w.say("%s is NAKed (%s)", name, a.Reason)
		w.end(s, slot)
	case Stop:
		if h.F.Ack == None {
			w.say("%s stops without ack or nak (a later delivery decides)", name)
		}
		w.end(s, slot)
	case Inspect:
		panic("model: the decider asked for a second inspection")
	}
	return ""
}

func (w *world) claim(s *State, slot int, v uint8) {
	h := &s.H[slot]
	e := uint8(slot / maxDel)
	name := slotName(s, slot)
	k := &s.Key
	var ans ClaimAnswer
	write := false
	mayBeStored := false
	switch {
	case k.Kind == keyMarker && k.RelEnv == e+1:
		ans = DeadLettered // its own release marker: nothing is written
	case k.Kind != keyClaim:
		ans, write = Won, true
		mayBeStored = k.Kind == keyMarker && k.RelStored
	case k.Env != e:
		ans = Duplicate
	case k.Gen == h.Gen && k.Count == h.Count || w.c.NoTakeover:
		ans = Owned
	case k.Gen > h.Gen || k.Gen == h.Gen && k.Count > h.Count:
		ans = Stale // a later delivery of this envelope holds the claim
	default:
		ans, write = Owned, true // take over an earlier delivery's claim, from its revision
	}
	if v == 2 && !write {
		v = 1 // nothing written: an answer lost is an answer not applied
	}
	if write && v != 1 {
		s.RevCtr++
		if ans == Won {
			*k = kvKey{Kind: keyClaim, Env: e, First: s.Epoch, RelStored: mayBeStored}
		}
		k.Rev, k.Gen, k.Count = s.RevCtr, h.Gen, h.Count
	}
	if v != 0 {
		h.F.Claim = ClaimFailed
		w.say("FAULT %s claims: no answer (written=%v)", name, write && v == 2)
		return
	}
	h.F.Claim = ans
	switch ans {
	case Won:
		h.Rev = k.Rev
		h.F.MayBeStored = mayBeStored
	case Owned:
		h.Rev = k.Rev
		h.F.Published = k.Pub
		h.F.PossibleDup = k.First < s.Epoch
		h.F.MayBeStored = k.RelStored
	case Duplicate:
		h.F.Published = k.Pub
		h.Holder, h.Rev = k.Env, k.Rev
	}
	what := ans.String()
	if ans == Owned && write {
		what = "owned (takeover)"
	}
	switch {
	case ans == DeadLettered:
		w.say("%s claims: the key holds its own release marker (rev %d): dead-lettered, nothing written", name, k.Rev)
		return
	case ans == Won && mayBeStored:
		what = "won over a release marker saying the event may be stored"
	}
	w.say("%s claims: %s (rev %d, holder %s, published=%v, first claimed in epoch %d)", name, what, k.Rev, envName(k.Env), k.Pub, k.First)
	if (ans == Won || ans == Owned && !h.F.Published) && !h.F.Unpublishable {
		s.R[h.Rep].Hold = holding{On: true, Env: e, Slot: uint8(slot)}
	}
}

func (w *world) ack(s *State, slot int, v uint8) string {
	h := &s.H[slot]
	e := uint8(slot / maxDel)
	ev := &s.E[e]
	name := slotName(s, slot)
	applies := h.Gen == s.Gen && ev.Present
	rule := ""
	if applies && v != 1 {
		ev.Present, ev.Out = false, false
		dup := h.F.Claim == Duplicate
		if dup {
			ev.DupAcked = true
		}
		if !ev.Stored && !ev.DLQ && !dup {
			rule = fmt.Sprintf("%s: %s is not stored, not dead-lettered, not a duplicate", RuleNoOutcome, envName(e))
		}
	}
	switch {
	case h.Gen != s.Gen:
		h.F.Ack = Failed
		w.say("%s acks: no consumer answers (it was re-created)", name)
	case v != 0:
		h.F.Ack = Failed
		w.say("FAULT %s acks: no answer (applied=%v)", name, applies && v == 2)
	default:
		h.F.Ack = OK
		w.say("%s acks (confirmed; %s removed from INGEST=%v)", name, envName(e), applies)
	}
	return rule
}

// recheck reads the key again after the input lookup found a Duplicate's holder gone.
func (w *world) recheck(s *State, slot int, v uint8) {
	h := &s.H[slot]
	k := &s.Key
	name := slotName(s, slot)
	// A read of the key, no write: is the claim still the one the Duplicate found (same revision)? A holder
	// that dead-lettered released it; a holder's later delivery may have claimed it again since.
	h.F.Recheck = NoLongerHeld
	if k.Kind == keyClaim && k.Rev == h.Rev {
		h.F.Recheck = StillHeld
	}
	if v != 0 {
		h.F.Recheck = RecheckFailed
	}
	w.say("%s reads the key again: %s (holder %s, rev %d found by its claim)", name,
		[...]string{"", "the same claim", "another revision or none", "no answer"}[h.F.Recheck], envName(h.Holder), h.Rev)
}

// end finishes a delivery: its holding, if it still is the replica's, is finished (published) or forgotten.
func (w *world) end(s *State, slot int) {
	h := &s.H[slot]
	r := &s.R[h.Rep]
	if r.Hold.On && int(r.Hold.Slot) == slot {
		if h.F.Publish == OK {
			r.Hold.Finished = true
		} else {
			r.Hold = holding{}
		}
	}
	s.H[slot] = handler{}
}

// lost is the end-state rule: every copy has left the input stream, and the event is neither in the output nor
// dead-lettered without a copy acked as its duplicate.
func (s *State) lost(c *Config) string {
	stored, dlq, dup := false, false, false
	for e := 0; e < c.Envelopes; e++ {
		ev := &s.E[e]
		if ev.Present {
			return "" // visibly stuck (still pending): a later delivery decides
		}
		stored = stored || ev.Stored
		dlq = dlq || ev.DLQ
		dup = dup || ev.DupAcked
	}
	switch {
	case stored:
		return ""
	case dlq && !dup:
		return ""
	case dlq:
		return RuleLost + ": never published; one copy dead-lettered and another acked as its duplicate"
	}
	return RuleLost + ": never published nor dead-lettered, every copy acked"
}
