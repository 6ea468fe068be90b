package protocol

import "time"

// Decider is the type of Decide: what an executor calls, so that a test can put a wrapper in its place.
type Decider func(Facts) Plan

// Decide returns the next step for the delivery described by f. It is pure: the same facts give the same plan.
func Decide(f Facts) Plan {
	if f.Naked {
		return Plan{Do: Stop, Stop: Done}
	}
	switch f.Kind {
	case Malformed:
		return deadLetter(f, DeadMalformed, false)
	case Unkeyed:
		return unkeyed(f, false)
	}
	return keyed(f)
}

func keyed(f Facts) Plan {
	switch f.Output.Built {
	case NotBuilt:
		return Plan{Do: Build, Keyed: true}
	case BuiltUnkeyed:
		return unkeyed(f, true) // the window was down, and the deployment forwards unkeyed then
	}
	if f.Claim.Status == NotClaimed {
		// Claim even an output that can never be stored: only the holder may dead-letter and acknowledge the
		// envelope (an earlier delivery that stalled may have become stale meanwhile), and its release admits
		// a well-formed copy.
		return Plan{Do: Claim}
	}
	c := f.Claim
	switch c.Status {
	case ClaimCancelled:
		return nak(f, NakShutdown)
	case ClaimInvalid:
		return deadLetter(f, DeadBadClaim, false)
	case ClaimUnavailable:
		if f.Config.ForwardWhenWindowDown {
			return unkeyed(f, true)
		}
		return nak(f, NakWindow)
	case ClaimLost:
		return nak(f, NakWindow)
	case Stale:
		return Plan{Do: Stop, Stop: StaleDelivery}
	case DeadLettered:
		// An earlier delivery stored the dead letter and released the claim, leaving a marker naming this
		// envelope; its ack may not have landed. Claiming again would make this delivery a holder of an envelope
		// the input may already have let go, so that a copy would take it for a finished holder and be dropped
		// while this delivery dead-letters and releases again.
		return ack(f, CountDeadLetter)
	case Owned:
		if c.Published {
			// An earlier delivery stored the event and recorded it: only the ack is missing. Publishing again
			// could outlive the output's duplicate window.
			return ack(f, CountUnique)
		}
		fallthrough
	case Won:
		if f.Output.Unstorable {
			return deadLetter(f, DeadOutputReject, true)
		}
		return publishKeyed(f)
	case Duplicate:
		if f.Output.Unstorable {
			return deadLetter(f, DeadOutputReject, false)
		}
		if c.Published || holderDone(f) {
			return duplicate(f)
		}
		switch {
		case f.Holder == HolderNotAsked:
			return Plan{Do: WaitHolder}
		case f.Holder == HolderNotHere && f.Input == InputNotAsked && !f.Config.InputKeeps && c.HolderKnown:
			return Plan{Do: LookupInput}
		case f.Holder == HolderNotHere && f.Input == InputGone && f.Recheck == NotRechecked && !f.Config.InputKeeps && c.HolderKnown:
			// The claim was read before the lookup: meanwhile the holder may have been refused, dead-lettered,
			// released the claim and been acknowledged. Only a key still holding the very claim read shows that
			// the holder left the input published.
			return Plan{Do: Recheck}
		}
		// The holder has not published yet (or has just failed to): acknowledging this copy now would lose the
		// event if the holder is refused, dead-lettered and releases the claim.
		return nak(f, NakHolder)
	}
	p := nak(f, NakWindow)
	p.Note = NoteUnknownStatus
	return p
}

// holderDone reports whether the holder of a Duplicate's claim is finished with its event: published in this
// process, or gone from a work-queue input stream with the key still holding the claim read (acknowledged:
// published, since a dead letter releases its claim before its ack and only the holder acknowledges).
func holderDone(f Facts) bool {
	switch f.Holder {
	case HolderPublished:
		return true
	case HolderNotHere:
		return f.Input == InputGone && f.Recheck == StillHeld && !f.Config.InputKeeps && f.Claim.HolderKnown
	}
	return false
}

// possibleDuplicate reports whether publishing a takeover now could store a second copy: an earlier delivery held
// the claim and may have stored the event without recording it, so long ago that the output's duplicate window no
// longer catches the same Nats-Msg-Id. The earlier publish was stored no earlier than the first claim; this one is
// stored within the publish timeout; a second of slack covers clock differences between replicas.
func possibleDuplicate(f Facts) bool {
	c := f.Claim
	if c.Status != Owned || !c.AgeKnown || f.Config.DupWindow <= 0 {
		return false
	}
	return c.FirstClaimAge+f.Config.PublishTimeout+time.Second >= f.Config.DupWindow
}

func publishKeyed(f Facts) Plan {
	if p, done := publish(f, true); done {
		return p
	}
	// Stored. Shutdown changes nothing from here on.
	if f.Config.InputKeeps {
		// A waiting copy cannot tell a finished holder by its absence from the input: record before the ack.
		switch f.Record {
		case NotRecorded:
			return Plan{Do: Record}
		case RecordFailed:
			// The redelivery publishes again under the same Nats-Msg-Id (collapsed within the duplicate
			// window) and records.
			return nak(f, NakRecord)
		}
		if f.Ack == NotAcked {
			p := ack(f, CountUnique)
			p.Note = movedNote(f)
			return p
		}
		return Plan{Do: Stop, Stop: Done}
	}
	if f.Ack == NotAcked {
		return ack(f, CountUnique)
	}
	if f.Ack == AckUnconfirmed {
		// The ack may be lost (and this process may not live to know): record the publish, so that a
		// redelivery after any delay only acknowledges.
		switch f.Record {
		case NotRecorded:
			return Plan{Do: Record}
		case RecordFailed:
			return Plan{Do: Stop, Stop: Done, Note: NoteUnrecorded}
		case RecordMoved:
			return Plan{Do: Stop, Stop: Done, Note: movedNote(f)}
		}
	}
	return Plan{Do: Stop, Stop: Done}
}

// movedNote is the note of a record that found the key moved on: a later delivery took the claim over (it
// publishes under the same Nats-Msg-Id and records) or the claim lapsed. Only a publish made after a hold past the
// bound or a pause may have reached the output outside the duplicate window of that later delivery's publish.
func movedNote(f Facts) Note {
	if f.Record != RecordMoved {
		return 0
	}
	if f.Hold.TooOld() {
		return NoteStoredTwice
	}
	return NoteMovedOn
}

// publish is the publish step common to keyed and unkeyed outputs: the plan and true until the output is stored.
func publish(f Facts, keyed bool) (Plan, bool) {
	switch f.Publish {
	case NotPublished:
		// The last moment to give up: once handed to the client library the publish goes out even if the process
		// is paused right after.
		if f.Hold.TooOld() {
			p := nak(f, NakHeld)
			p.Note = NoteHeld
			return p, true
		}
		p := Plan{Do: Publish}
		if keyed && (possibleDuplicate(f) || f.Claim.MayBeStored) {
			p.Mark, p.Note = PossibleDuplicate, NotePossibleDuplicate
		}
		return p, true
	case PublishStored:
		return Plan{}, false
	case PublishRefused:
		return deadLetter(f, DeadOutputReject, keyed), true
	case PublishCancelled:
		return nak(f, NakShutdown), true
	}
	return nak(f, NakPublish), true
}

func unkeyed(f Facts, fallback bool) Plan {
	if f.Output.Built != BuiltUnkeyed {
		return Plan{Do: Build, Fallback: fallback}
	}
	if fallback && (f.Output.Unstorable || f.Publish == PublishRefused) {
		// A keyed envelope forwarded because the window could not decide may hold its key's claim all the same (a
		// claim made whose answer was lost, or an earlier delivery's). Dead-lettered and acknowledged without
		// releasing it, it would leave the claim looking like a finished holder's, and a well-formed copy would be
		// dropped as its duplicate. Only the holder dead-letters a keyed envelope: the redelivery claims first.
		return nak(f, NakWindow)
	}
	if f.Output.Unstorable {
		return deadLetter(f, DeadOutputReject, false)
	}
	if p, done := publish(f, false); done {
		return p
	}
	if f.Ack == NotAcked {
		return ack(f, CountUnkeyed)
	}
	return Plan{Do: Stop, Stop: Done}
}

func duplicate(f Facts) Plan {
	var note Note
	if f.Config.CopyDuplicates {
		switch f.Copy {
		case NotPublished:
			return Plan{Do: PublishCopy}
		case PublishFailed:
			return nak(f, NakPublish)
		case PublishCancelled:
			return nak(f, NakShutdown)
		case PublishRefused:
			note = NoteCopyRefused
		}
	}
	if f.Ack == NotAcked {
		p := ack(f, CountDuplicate)
		p.Note = note
		return p
	}
	return Plan{Do: Stop, Stop: Done}
}

// deadLetter dead-letters the envelope, releasing its claim first when the delivery holds one (release).
func deadLetter(f Facts, why Dead, release bool) Plan {
	switch f.DeadLetter {
	case NotPublished:
		return Plan{Do: DeadLetter, Dead: why}
	case PublishCancelled:
		return nak(f, NakShutdown)
	case PublishFailed, PublishRefused:
		return nak(f, NakDeadLetter)
	}
	if release {
		switch f.Release {
		case NotReleased:
			return Plan{Do: Release, MayBeStored: mayBeStored(f)}
		case ReleaseFailed:
			// Acknowledging now would leave the claim looking like a finished holder's: its copies would be
			// dropped and the event live on only as this dead letter. The redelivery dead-letters again (under
			// the same Nats-Msg-Id) and releases.
			return nak(f, NakWindow)
		case ReleaseMoved:
			// Not the holder any more: a later delivery holds the claim undecided. An ack from this delivery
			// would remove the envelope from the input under it.
			return Plan{Do: Stop, Stop: Superseded}
		}
	}
	if f.Ack == NotAcked {
		return ack(f, CountDeadLetter)
	}
	return Plan{Do: Stop, Stop: Done}
}

// mayBeStored reports whether the event may be in the output although this holder dead-letters it: it took the
// claim over from an earlier delivery, which may have stored it without recording (and been acknowledged), or it
// won the key over a marker that said so. Its release marker says so in turn, so that the copy admitted next
// publishes marked as a possible duplicate rather than silently twice; not releasing instead would drop that copy
// as a duplicate when the earlier delivery never stored the event (a loss).
func mayBeStored(f Facts) bool {
	return f.Claim.Status == Owned || f.Claim.MayBeStored
}

func ack(f Facts, c Count) Plan {
	if f.Ack != NotAcked {
		return Plan{Do: Stop, Stop: Done}
	}
	return Plan{Do: Ack, Count: c}
}

func nak(f Facts, why NakReason) Plan {
	p := Plan{Do: Nak, Nak: why}
	if why != NakShutdown && why != NakHeld {
		p.Delay = NakDelay(f.Delivered)
	}
	return p
}
