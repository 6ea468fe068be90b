package protocol_test

import (
	"testing"
	"time"

	. "github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

var cfg = Config{DupWindow: 2 * time.Minute, PublishTimeout: 10 * time.Second}

var fresh = Hold{Held: time.Second, Bound: time.Minute}

// keyed is a keyed delivery with its output built (storable) and the claim's result c.
func keyed(c ClaimResult) Facts {
	return Facts{Kind: Keyed, Delivered: 1, Config: cfg, Hold: fresh, Output: Output{Built: BuiltKeyed}, Claim: c}
}

func with(f Facts, change func(*Facts)) Facts { change(&f); return f }

var (
	won      = ClaimResult{Status: Won, AgeKnown: true}
	owned    = ClaimResult{Status: Owned, AgeKnown: true, FirstClaimAge: 30 * time.Second}
	ownedOld = ClaimResult{Status: Owned, AgeKnown: true, FirstClaimAge: 110 * time.Second}
	ownedPub = ClaimResult{Status: Owned, Published: true, AgeKnown: true}
	dupUndec = ClaimResult{Status: Duplicate, HolderKnown: true, AgeKnown: true}
	dupDec   = ClaimResult{Status: Duplicate, Published: true, HolderKnown: true}
	stale    = ClaimResult{Status: Stale}
	// wonOverStored won the key over the release marker of a holder that may have stored the event.
	wonOverStored = ClaimResult{Status: Won, AgeKnown: true, MayBeStored: true}
	unstorable    = func(f *Facts) { f.Output.Unstorable = true }
	keeps         = func(f *Facts) { f.Config.InputKeeps = true }
	stored        = func(f *Facts) { f.Publish = PublishStored }
	d250          = 250 * time.Millisecond
)

func TestDecide(t *testing.T) {
	rows := []struct {
		name string
		f    Facts
		want Plan
	}{
		// Inspection.
		{"malformed: dead letter", Facts{Kind: Malformed}, Plan{Do: DeadLetter, Dead: DeadMalformed}},
		{"malformed: stored, ack", Facts{Kind: Malformed, DeadLetter: PublishStored}, Plan{Do: Ack, Count: CountDeadLetter}},
		{"malformed: dead letter failed", Facts{Kind: Malformed, Delivered: 3, DeadLetter: PublishFailed}, Plan{Do: Nak, Nak: NakDeadLetter, Delay: time.Second}},
		{"malformed: dead letter refused for good", Facts{Kind: Malformed, DeadLetter: PublishRefused}, Plan{Do: Nak, Nak: NakDeadLetter, Delay: d250}},
		{"malformed: dead letter cancelled", Facts{Kind: Malformed, DeadLetter: PublishCancelled}, Plan{Do: Nak, Nak: NakShutdown}},
		{"malformed: acked", Facts{Kind: Malformed, DeadLetter: PublishStored, Ack: AckUnconfirmed}, Plan{Do: Stop, Stop: Done}},
		{"nak sent: stop", Facts{Kind: Keyed, Naked: true}, Plan{Do: Stop, Stop: Done}},

		// Unkeyed.
		{"unkeyed: build", Facts{Kind: Unkeyed, Hold: fresh}, Plan{Do: Build}},
		{"unkeyed: unstorable", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed, Unstorable: true}}, Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"unkeyed: publish", Facts{Kind: Unkeyed, Hold: fresh, Output: Output{Built: BuiltUnkeyed}}, Plan{Do: Publish}},
		{"unkeyed: held too long", Facts{Kind: Unkeyed, Hold: Hold{Held: 2 * time.Minute, Bound: time.Minute}, Output: Output{Built: BuiltUnkeyed}}, Plan{Do: Nak, Nak: NakHeld, Note: NoteHeld}},
		{"unkeyed: paused", Facts{Kind: Unkeyed, Hold: Hold{Paused: true, Bound: time.Minute}, Output: Output{Built: BuiltUnkeyed}}, Plan{Do: Nak, Nak: NakHeld, Note: NoteHeld}},
		{"unkeyed: stored, ack", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed}, Publish: PublishStored}, Plan{Do: Ack, Count: CountUnkeyed}},
		{"unkeyed: stored and acked", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed}, Publish: PublishStored, Ack: AckUnconfirmed}, Plan{Do: Stop}},
		{"unkeyed: publish failed", Facts{Kind: Unkeyed, Delivered: 2, Output: Output{Built: BuiltUnkeyed}, Publish: PublishFailed}, Plan{Do: Nak, Nak: NakPublish, Delay: 500 * time.Millisecond}},
		{"unkeyed: publish cancelled", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed}, Publish: PublishCancelled}, Plan{Do: Nak, Nak: NakShutdown}},
		{"unkeyed: publish refused: dead letter, no release", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed}, Publish: PublishRefused}, Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"unkeyed: refused, dead letter stored: ack", Facts{Kind: Unkeyed, Output: Output{Built: BuiltUnkeyed}, Publish: PublishRefused, DeadLetter: PublishStored}, Plan{Do: Ack, Count: CountDeadLetter}},

		// Keyed, up to the claim.
		{"keyed: build", Facts{Kind: Keyed}, Plan{Do: Build, Keyed: true}},
		{"keyed: claim", keyed(ClaimResult{}), Plan{Do: Claim}},
		{"keyed unstorable: claim first (even a first delivery)", with(keyed(ClaimResult{}), unstorable), Plan{Do: Claim}},
		{"claim cancelled", keyed(ClaimResult{Status: ClaimCancelled}), Plan{Do: Nak, Nak: NakShutdown}},
		{"claim invalid", keyed(ClaimResult{Status: ClaimInvalid}), Plan{Do: DeadLetter, Dead: DeadBadClaim}},
		{"claim invalid, dead letter stored: ack, no release", with(keyed(ClaimResult{Status: ClaimInvalid}), func(f *Facts) { f.DeadLetter = PublishStored }), Plan{Do: Ack, Count: CountDeadLetter}},
		{"window unavailable", keyed(ClaimResult{Status: ClaimUnavailable}), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"window lost", keyed(ClaimResult{Status: ClaimLost}), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"window lost, forward when down: still nak", with(keyed(ClaimResult{Status: ClaimLost}), func(f *Facts) { f.Config.ForwardWhenWindowDown = true }), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"window unavailable, forward when down: build unkeyed", with(keyed(ClaimResult{Status: ClaimUnavailable}), func(f *Facts) { f.Config.ForwardWhenWindowDown = true }), Plan{Do: Build, Fallback: true}},
		{"window unavailable, forwarded unkeyed: publish", with(keyed(ClaimResult{Status: ClaimUnavailable}), func(f *Facts) { f.Config.ForwardWhenWindowDown = true; f.Output.Built = BuiltUnkeyed }), Plan{Do: Publish}},
		{"window unavailable, unkeyed stored: ack unkeyed", with(keyed(ClaimResult{Status: ClaimUnavailable}), func(f *Facts) {
			f.Config.ForwardWhenWindowDown = true
			f.Output.Built = BuiltUnkeyed
			f.Publish = PublishStored
		}), Plan{Do: Ack, Count: CountUnkeyed}},
		{"window unavailable, forwarded unkeyed but unstorable: nak, never a dead letter without the claim", with(keyed(ClaimResult{Status: ClaimUnavailable}), func(f *Facts) {
			f.Config.ForwardWhenWindowDown = true
			f.Output = Output{Built: BuiltUnkeyed, Unstorable: true}
		}), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"window unavailable, forwarded unkeyed, refused for good: nak, never a dead letter without the claim", with(keyed(ClaimResult{Status: ClaimUnavailable}), func(f *Facts) {
			f.Config.ForwardWhenWindowDown = true
			f.Output.Built = BuiltUnkeyed
			f.Publish = PublishRefused
		}), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"unknown status", keyed(ClaimResult{Status: ClaimUnknown}), Plan{Do: Nak, Nak: NakWindow, Delay: d250, Note: NoteUnknownStatus}},
		{"stale: nothing", keyed(stale), Plan{Do: Stop, Stop: StaleDelivery}},
		{"stale and unstorable: nothing", with(keyed(stale), unstorable), Plan{Do: Stop, Stop: StaleDelivery}},

		// Holding the claim.
		{"won: publish", keyed(won), Plan{Do: Publish}},
		{"owned: publish unmarked", keyed(owned), Plan{Do: Publish}},
		{"owned long ago: publish marked", keyed(ownedOld), Plan{Do: Publish, Mark: PossibleDuplicate, Note: NotePossibleDuplicate}},
		// The edge: stored no earlier than the first claim, the takeover's publish within the publish timeout,
		// a second of slack for clocks; at the window's length exactly, marked.
		{"owned at the window's edge (109s + 10s + 1s): publish marked", keyed(ClaimResult{Status: Owned, AgeKnown: true, FirstClaimAge: 109 * time.Second}), Plan{Do: Publish, Mark: PossibleDuplicate, Note: NotePossibleDuplicate}},
		{"owned a second inside the edge (108s): unmarked", keyed(ClaimResult{Status: Owned, AgeKnown: true, FirstClaimAge: 108 * time.Second}), Plan{Do: Publish}},
		{"owned, age unknown: unmarked", keyed(ClaimResult{Status: Owned, FirstClaimAge: time.Hour}), Plan{Do: Publish}},
		{"owned long ago, no duplicate window: unmarked", with(keyed(ownedOld), func(f *Facts) { f.Config.DupWindow = 0 }), Plan{Do: Publish}},
		{"won long ago: unmarked", keyed(ClaimResult{Status: Won, AgeKnown: true, FirstClaimAge: time.Hour}), Plan{Do: Publish}},
		{"owned and recorded: ack only", keyed(ownedPub), Plan{Do: Ack, Count: CountUnique}},
		{"owned and recorded, unstorable: ack only (stored already)", with(keyed(ownedPub), unstorable), Plan{Do: Ack, Count: CountUnique}},
		{"owned and recorded, acked", with(keyed(ownedPub), func(f *Facts) { f.Ack = AckConfirmed }), Plan{Do: Stop}},
		{"won, held too long", with(keyed(won), func(f *Facts) { f.Hold.Held = 2 * time.Minute }), Plan{Do: Nak, Nak: NakHeld, Note: NoteHeld}},
		{"won, paused", with(keyed(won), func(f *Facts) { f.Hold.Paused = true }), Plan{Do: Nak, Nak: NakHeld, Note: NoteHeld}},
		{"won, held exactly the bound: publish", with(keyed(won), func(f *Facts) { f.Hold.Held = time.Minute }), Plan{Do: Publish}},
		{"won, publish failed", with(keyed(won), func(f *Facts) { f.Publish = PublishFailed; f.Delivered = 9 }), Plan{Do: Nak, Nak: NakPublish, Delay: 5 * time.Second}},
		{"won, publish cancelled", with(keyed(won), func(f *Facts) { f.Publish = PublishCancelled }), Plan{Do: Nak, Nak: NakShutdown}},
		{"won, publish refused: dead letter", with(keyed(won), func(f *Facts) { f.Publish = PublishRefused }), Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"won, refused, dead letter stored: release", with(keyed(won), func(f *Facts) { f.Publish = PublishRefused; f.DeadLetter = PublishStored }), Plan{Do: Release}},
		{"won, refused, released: ack", with(keyed(won), func(f *Facts) { f.Publish = PublishRefused; f.DeadLetter = PublishStored; f.Release = Released }), Plan{Do: Ack, Count: CountDeadLetter}},

		// Holding the claim, output unstorable (limits lowered since the envelope was stored).
		{"won, unstorable: dead letter", with(keyed(won), unstorable), Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"owned, unstorable: dead letter", with(keyed(owned), unstorable), Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"unstorable, dead letter failed", with(keyed(won), func(f *Facts) { unstorable(f); f.DeadLetter = PublishFailed }), Plan{Do: Nak, Nak: NakDeadLetter, Delay: d250}},
		{"unstorable, dead letter cancelled", with(keyed(won), func(f *Facts) { unstorable(f); f.DeadLetter = PublishCancelled }), Plan{Do: Nak, Nak: NakShutdown}},
		{"unstorable, dead letter stored: release", with(keyed(won), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored }), Plan{Do: Release}},
		{"unstorable, released: ack", with(keyed(won), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored; f.Release = Released }), Plan{Do: Ack, Count: CountDeadLetter}},
		{"unstorable, release failed: nak", with(keyed(won), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored; f.Release = ReleaseFailed }), Plan{Do: Nak, Nak: NakWindow, Delay: d250}},
		{"unstorable, release found the key moved on: nothing", with(keyed(owned), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored; f.Release = ReleaseMoved }), Plan{Do: Stop, Stop: Superseded}},
		// A release marker names its envelope and says whether the event may be stored: the same envelope's
		// later delivery finds its dead letter decided (no claim), a copy claims over it (marked if so).
		{"owned, unstorable, dead letter stored: release, may be stored", with(keyed(owned), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored }), Plan{Do: Release, MayBeStored: true}},
		{"owned, refused, dead letter stored: release, may be stored", with(keyed(owned), func(f *Facts) { f.Publish = PublishRefused; f.DeadLetter = PublishStored }), Plan{Do: Release, MayBeStored: true}},
		{"won over a may-be-stored marker, refused: release, may be stored", with(keyed(wonOverStored), func(f *Facts) { f.Publish = PublishRefused; f.DeadLetter = PublishStored }), Plan{Do: Release, MayBeStored: true}},
		{"won over a may-be-stored marker: publish marked", keyed(wonOverStored), Plan{Do: Publish, Mark: PossibleDuplicate, Note: NotePossibleDuplicate}},
		{"takeover of a claim made over a may-be-stored marker: publish marked", keyed(ClaimResult{Status: Owned, AgeKnown: true, MayBeStored: true}), Plan{Do: Publish, Mark: PossibleDuplicate, Note: NotePossibleDuplicate}},
		{"own release marker: ack the dead letter", keyed(ClaimResult{Status: DeadLettered}), Plan{Do: Ack, Count: CountDeadLetter}},
		{"own release marker, unstorable: ack the dead letter", with(keyed(ClaimResult{Status: DeadLettered}), unstorable), Plan{Do: Ack, Count: CountDeadLetter}},
		{"own release marker, acked", with(keyed(ClaimResult{Status: DeadLettered}), func(f *Facts) { f.Ack = AckUnconfirmed }), Plan{Do: Stop}},
		{"unstorable, released and acked", with(keyed(won), func(f *Facts) {
			unstorable(f)
			f.DeadLetter = PublishStored
			f.Release = Released
			f.Ack = AckConfirmed
		}), Plan{Do: Stop}},

		// Stored, work-queue input: ack first, record only an unconfirmed ack.
		{"stored: ack", with(keyed(won), stored), Plan{Do: Ack, Count: CountUnique}},
		{"stored, ack confirmed: done", with(keyed(won), func(f *Facts) { stored(f); f.Ack = AckConfirmed }), Plan{Do: Stop}},
		{"stored, ack unconfirmed: record", with(keyed(won), func(f *Facts) { stored(f); f.Ack = AckUnconfirmed }), Plan{Do: Record}},
		{"stored, ack unconfirmed, recorded", with(keyed(won), func(f *Facts) { stored(f); f.Ack = AckUnconfirmed; f.Record = Recorded }), Plan{Do: Stop}},
		{"stored, ack unconfirmed, record failed", with(keyed(won), func(f *Facts) { stored(f); f.Ack = AckUnconfirmed; f.Record = RecordFailed }), Plan{Do: Stop, Note: NoteUnrecorded}},
		{"stored, ack unconfirmed, key moved on", with(keyed(won), func(f *Facts) { stored(f); f.Ack = AckUnconfirmed; f.Record = RecordMoved }), Plan{Do: Stop, Note: NoteMovedOn}},
		{"stored after a pause, key moved on: stored twice", with(keyed(won), func(f *Facts) {
			stored(f)
			f.Ack = AckUnconfirmed
			f.Record = RecordMoved
			f.Hold.Paused = true
		}), Plan{Do: Stop, Note: NoteStoredTwice}},
		{"stored, shutdown makes no difference: ack", with(keyed(owned), stored), Plan{Do: Ack, Count: CountUnique}},

		// Stored, input keeps acknowledged envelopes: record first.
		{"keeps, stored: record", with(keyed(won), func(f *Facts) { keeps(f); stored(f) }), Plan{Do: Record}},
		{"keeps, recorded: ack", with(keyed(won), func(f *Facts) { keeps(f); stored(f); f.Record = Recorded }), Plan{Do: Ack, Count: CountUnique}},
		{"keeps, record failed: nak", with(keyed(won), func(f *Facts) { keeps(f); stored(f); f.Record = RecordFailed; f.Delivered = 2 }), Plan{Do: Nak, Nak: NakRecord, Delay: 500 * time.Millisecond}},
		{"keeps, key moved on: ack", with(keyed(won), func(f *Facts) { keeps(f); stored(f); f.Record = RecordMoved }), Plan{Do: Ack, Count: CountUnique, Note: NoteMovedOn}},
		{"keeps, key moved on after a hold past the bound: ack, stored twice", with(keyed(won), func(f *Facts) {
			keeps(f)
			stored(f)
			f.Record = RecordMoved
			f.Hold.Held = time.Hour
		}), Plan{Do: Ack, Count: CountUnique, Note: NoteStoredTwice}},
		{"keeps, recorded and acked", with(keyed(won), func(f *Facts) { keeps(f); stored(f); f.Record = Recorded; f.Ack = AckUnconfirmed }), Plan{Do: Stop}},

		// Duplicates.
		{"duplicate, decided: ack", keyed(dupDec), Plan{Do: Ack, Count: CountDuplicate}},
		{"duplicate, decided, acked", with(keyed(dupDec), func(f *Facts) { f.Ack = AckConfirmed }), Plan{Do: Stop}},
		{"duplicate, decided, copies: copy", with(keyed(dupDec), func(f *Facts) { f.Config.CopyDuplicates = true }), Plan{Do: PublishCopy}},
		{"duplicate, copy stored: ack", with(keyed(dupDec), func(f *Facts) { f.Config.CopyDuplicates = true; f.Copy = PublishStored }), Plan{Do: Ack, Count: CountDuplicate}},
		{"duplicate, copy refused: ack, counted only", with(keyed(dupDec), func(f *Facts) { f.Config.CopyDuplicates = true; f.Copy = PublishRefused }), Plan{Do: Ack, Count: CountDuplicate, Note: NoteCopyRefused}},
		{"duplicate, copy failed: nak", with(keyed(dupDec), func(f *Facts) { f.Config.CopyDuplicates = true; f.Copy = PublishFailed }), Plan{Do: Nak, Nak: NakPublish, Delay: d250}},
		{"duplicate, copy cancelled: nak", with(keyed(dupDec), func(f *Facts) { f.Config.CopyDuplicates = true; f.Copy = PublishCancelled }), Plan{Do: Nak, Nak: NakShutdown}},
		{"duplicate, unstorable: dead letter, no release", with(keyed(dupUndec), unstorable), Plan{Do: DeadLetter, Dead: DeadOutputReject}},
		{"duplicate, unstorable, dead letter stored: ack", with(keyed(dupUndec), func(f *Facts) { unstorable(f); f.DeadLetter = PublishStored }), Plan{Do: Ack, Count: CountDeadLetter}},
		{"duplicate, undecided: wait for a holder here", keyed(dupUndec), Plan{Do: WaitHolder}},
		{"holder here published: ack", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderPublished }), Plan{Do: Ack, Count: CountDuplicate}},
		{"holder here unpublished: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderUnpublished }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder here timed out: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderTimedOut }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder elsewhere: look up the input", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere }), Plan{Do: LookupInput}},
		{"holder elsewhere, unknown holder: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Claim.HolderKnown = false }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder elsewhere, input keeps: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; keeps(f) }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder gone from the input: read the key again", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputGone }), Plan{Do: Recheck}},
		{"holder gone, key still holds its claim: ack", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputGone; f.Recheck = StillHeld }), Plan{Do: Ack, Count: CountDuplicate}},
		{"holder gone, claim released or moved on since: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputGone; f.Recheck = NoLongerHeld }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder gone, recheck failed: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputGone; f.Recheck = RecheckFailed }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder still in the input: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputPresent }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder look-up failed: nak", with(keyed(dupUndec), func(f *Facts) { f.Holder = HolderNotHere; f.Input = InputFailed }), Plan{Do: Nak, Nak: NakHolder, Delay: d250}},
		{"holder gone, still held, copies: copy", with(keyed(dupUndec), func(f *Facts) {
			f.Holder = HolderNotHere
			f.Input = InputGone
			f.Recheck = StillHeld
			f.Config.CopyDuplicates = true
		}), Plan{Do: PublishCopy}},
	}
	for _, r := range rows {
		if got := Decide(r.f); got != r.want {
			t.Errorf("%s:\n got  %v\n want %v", r.name, got, r.want)
		}
	}
}

func TestNakDelay(t *testing.T) {
	for _, r := range []struct {
		n    uint64
		want time.Duration
	}{{0, d250}, {1, d250}, {2, 500 * time.Millisecond}, {3, time.Second}, {5, 4 * time.Second}, {6, 5 * time.Second}, {1 << 40, 5 * time.Second}} {
		if got := NakDelay(r.n); got != r.want {
			t.Errorf("NakDelay(%d) = %s, want %s", r.n, got, r.want)
		}
	}
}
