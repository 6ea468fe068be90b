package model

// Legacy is the worker's decisions as pipeline/worker.go and outcome.go made them before the decision core, step for
// step (keyed envelopes, no ForwardWhenWindowDown): the baseline the model's own tests check it finds the known
// holes in, and what a core is compared with.
//
// Two holes are left in on purpose, as they were: a dead letter whose release found the key moved on still acks
// (deadLetterAndRelease ignored Release's false), and a first delivery found unpublishable is dead-lettered and
// acked without a claim (a later delivery of the same envelope may hold the claim undecided).
var Legacy Decider = DeciderFunc(legacyNext)

func legacyNext(f Facts) Action {
	if !f.Inspected {
		return Action{Kind: Inspect}
	}
	if f.Unpublishable && f.First && f.Claim == ClaimNone {
		return legacyDeadLetter(f, false)
	}
	switch f.Claim {
	case ClaimNone:
		return Action{Kind: Claim}
	case ClaimFailed:
		return Action{Kind: Nak, Reason: "window"}
	}
	if f.Unpublishable && f.Claim != Stale {
		release := f.Claim == Won || f.Claim == Owned && !f.Published
		return legacyDeadLetter(f, release)
	}
	switch f.Claim {
	case Owned:
		if f.Published {
			return ackThenStop(f)
		}
		return legacyForward(f, f.PossibleDup)
	case Won:
		return legacyForward(f, false)
	case Duplicate:
		if !f.Published {
			// holderDone: the holding in memory if there is one, else the input stream (a work queue).
			switch {
			case f.Holder == HolderNotAsked:
				return Action{Kind: WaitHolder}
			case f.Holder == HolderPublished:
			case f.Holder == HolderNotHere && !f.InputKeeps && f.Input == InputNotAsked:
				return Action{Kind: LookupInput}
			case f.Holder == HolderNotHere && f.Input == InputGone:
			default:
				return Action{Kind: Nak, Reason: "holder-undecided"}
			}
		}
		return ackThenStop(f)
	}
	return Action{Kind: Stop} // Stale: the later delivery decides
}

func ackThenStop(f Facts) Action {
	if f.Ack == None {
		return Action{Kind: Ack}
	}
	return Action{Kind: Stop}
}

// legacyForward is forward for a delivery holding the claim.
func legacyForward(f Facts, marked bool) Action {
	switch f.Publish {
	case None:
		if f.TooOld {
			return Action{Kind: Nak, Reason: "held"}
		}
		return Action{Kind: Publish, Marked: marked}
	case Refused:
		return legacyDeadLetter(f, true)
	case Failed:
		return Action{Kind: Nak, Reason: "publish"}
	}
	if f.InputKeeps {
		switch f.Record {
		case None:
			return Action{Kind: Record}
		case Failed:
			return Action{Kind: Nak, Reason: "record"}
		}
		return ackThenStop(f)
	}
	switch {
	case f.Ack == None:
		return Action{Kind: Ack}
	case f.Ack == Failed && f.Record == None:
		return Action{Kind: Record}
	}
	return Action{Kind: Stop}
}

// legacyDeadLetter is deadLetterAndRelease.
func legacyDeadLetter(f Facts, release bool) Action {
	switch f.DeadLetter {
	case None:
		return Action{Kind: DeadLetter}
	case Failed:
		return Action{Kind: Nak, Reason: "dead-letter"}
	}
	if release {
		switch f.Release {
		case None:
			return Action{Kind: Release}
		case Failed:
			return Action{Kind: Nak, Reason: "window"}
		}
		// Moved: ignored, as deadLetterAndRelease did.
	}
	return ackThenStop(f)
}
