package model

import (
	"time"

	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// The deployment the model's clock stands for: a duplicate window of dupWindow, a hold bound of half of it. The
// model's time moves a whole duplicate window at a step, so a delivery held across a step is past the bound and a
// claim first made a step ago is older than the window.
const (
	dupWindow      = 10 * time.Second
	publishTimeout = time.Second
)

// Protocol is the decision core decide (protocol.Decide, or a wrapper of it) as the model drives it: each of the
// model's facts is translated into the core's, and its plan into the model's next step. The core's steps the model
// leaves out (unkeyed and malformed envelopes, the duplicate's copy, shutdown) are never asked for.
func Protocol(decide protocol.Decider) Decider {
	return DeciderFunc(func(f Facts) Action { return FromPlan(decide(ToFacts(f))) })
}

// ToFacts is the core's view of the model's facts of one delivery.
func ToFacts(f Facts) protocol.Facts {
	pf := protocol.Facts{
		Kind:      protocol.Keyed,
		Delivered: 2,
		Config: protocol.Config{InputKeeps: f.InputKeeps, ForwardWhenWindowDown: f.Forward,
			DupWindow: dupWindow, PublishTimeout: publishTimeout},
		Hold: protocol.Hold{Bound: dupWindow / 2},
	}
	if f.First {
		pf.Delivered = 1
	}
	if f.TooOld {
		pf.Hold.Held = dupWindow
	}
	if f.Inspected {
		pf.Output = protocol.Output{Built: protocol.BuiltKeyed, Unstorable: f.Unpublishable}
	}
	if f.Forwarded {
		pf.Output = protocol.Output{Built: protocol.BuiltUnkeyed, Unstorable: f.Unpublishable}
	}
	pf.Claim.Status = [...]protocol.ClaimStatus{ClaimNone: protocol.NotClaimed, ClaimFailed: protocol.ClaimUnavailable,
		Won: protocol.Won, Owned: protocol.Owned, Duplicate: protocol.Duplicate, Stale: protocol.Stale, DeadLettered: protocol.DeadLettered}[f.Claim]
	if f.Claim != ClaimNone && f.Claim != ClaimFailed {
		pf.Claim.Published = f.Published
		pf.Claim.MayBeStored = f.MayBeStored
		pf.Claim.HolderKnown = true
		pf.Claim.AgeKnown = true
		if f.PossibleDup {
			pf.Claim.FirstClaimAge = dupWindow
		}
	}
	pf.Holder = [...]protocol.HolderResult{HolderNotAsked: protocol.HolderNotAsked, HolderNotHere: protocol.HolderNotHere,
		HolderPublished: protocol.HolderPublished, HolderUnpublished: protocol.HolderUnpublished,
		HolderTimedOut: protocol.HolderTimedOut}[f.Holder]
	pf.Input = [...]protocol.InputResult{InputNotAsked: protocol.InputNotAsked, InputGone: protocol.InputGone,
		InputPresent: protocol.InputPresent}[f.Input]
	pf.Recheck = [...]protocol.RecheckResult{RecheckNone: protocol.NotRechecked, StillHeld: protocol.StillHeld,
		NoLongerHeld: protocol.NoLongerHeld, RecheckFailed: protocol.RecheckFailed}[f.Recheck]
	pf.Publish = publishResult(f.Publish)
	pf.DeadLetter = publishResult(f.DeadLetter)
	pf.Release = [...]protocol.ReleaseResult{None: protocol.NotReleased, OK: protocol.Released,
		Moved: protocol.ReleaseMoved, Failed: protocol.ReleaseFailed}[f.Release]
	pf.Record = [...]protocol.RecordResult{None: protocol.NotRecorded, OK: protocol.Recorded,
		Moved: protocol.RecordMoved, Failed: protocol.RecordFailed}[f.Record]
	pf.Ack = [...]protocol.AckResult{None: protocol.NotAcked, OK: protocol.AckConfirmed, Failed: protocol.AckUnconfirmed}[f.Ack]
	return pf
}

func publishResult(r Result) protocol.PublishResult {
	return [...]protocol.PublishResult{None: protocol.NotPublished, OK: protocol.PublishStored,
		Refused: protocol.PublishRefused, Failed: protocol.PublishFailed}[r]
}

// FromPlan is the model's step for the core's plan.
func FromPlan(p protocol.Plan) Action {
	switch p.Do {
	case protocol.Build:
		return Action{Kind: Inspect, Unkeyed: !p.Keyed}
	case protocol.Claim:
		return Action{Kind: Claim}
	case protocol.WaitHolder:
		return Action{Kind: WaitHolder}
	case protocol.LookupInput:
		return Action{Kind: LookupInput}
	case protocol.Publish:
		return Action{Kind: Publish, Marked: p.Mark&protocol.PossibleDuplicate != 0}
	case protocol.DeadLetter:
		return Action{Kind: DeadLetter}
	case protocol.Release:
		return Action{Kind: Release, Named: true, MayBeStored: p.MayBeStored}
	case protocol.Record:
		return Action{Kind: Record}
	case protocol.Ack:
		return Action{Kind: Ack}
	case protocol.Nak:
		return Action{Kind: Nak, Reason: p.Nak.String()}
	case protocol.Recheck:
		return Action{Kind: Recheck}
	case protocol.Stop:
		return Action{Kind: Stop}
	}
	panic("model: the core planned a step the model does not know: " + p.Do.String())
}
