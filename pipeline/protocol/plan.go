package protocol

import "time"

// Plan is the next step for one delivery. Only the fields of its action are set.
type Plan struct {
	Do Action
	// Keyed, with Build: build the keyed output (Idempotency-Key and Nats-Msg-Id of the event key); false: the
	// unkeyed one. Fallback, with an unkeyed Build of a keyed envelope: its reason is window-unavailable.
	Keyed, Fallback bool
	// Mark, with Publish: the marks the output carries.
	Mark Mark
	// Dead, with DeadLetter: the dead-letter reason.
	Dead Dead
	// MayBeStored, with Release: the release marker says that an earlier holder may have stored the event (the
	// delivery took the claim over, or won it over such a marker), so that the copy admitted next publishes marked.
	MayBeStored bool
	// Count, with Ack: what the envelope counts as once acknowledged.
	Count Count
	// Nak and Delay, with Nak: why the delivery is handed back (the metric's reason) and when it may come again.
	Nak   NakReason
	Delay time.Duration
	// Stop, with Stop: why nothing more is done.
	Stop StopReason
	// Note says what the executor logs or counts beside the step.
	Note Note
}

// Action is what the executor does next.
type Action uint8

const (
	// Stop: nothing more; the delivery has been acknowledged or handed back, or is stale (Plan.Stop says which).
	Stop Action = iota
	// Build the output (Plan.Keyed) and report it in Facts.Output.
	Build
	// Claim the event key in the window; report Facts.Claim.
	Claim
	// WaitHolder waits in memory, bounded, for the Duplicate's holder if a worker of this process holds the claim;
	// report Facts.Holder.
	WaitHolder
	// LookupInput asks the input stream whether the Duplicate's holder envelope is still in it; report Facts.Input.
	LookupInput
	// Publish the output (with Plan.Mark); report Facts.Publish.
	Publish
	// PublishCopy publishes the duplicate's copy to the duplicates subject; report Facts.Copy.
	PublishCopy
	// DeadLetter publishes the dead letter (Plan.Dead); report Facts.DeadLetter.
	DeadLetter
	// Release replaces the delivery's claim, expecting the revision it holds, by a release marker naming the
	// envelope (with Plan.MayBeStored and the claim's TTL); report Facts.Release.
	Release
	// Record writes the publish into the delivery's claim, expecting the revision it holds; report Facts.Record.
	Record
	// Ack acknowledges the delivery and counts it (Plan.Count); report Facts.Ack.
	Ack
	// Nak hands the delivery back (Plan.Nak, Plan.Delay); set Facts.Naked.
	Nak
	// Recheck reads the key again once LookupInput found a Duplicate's holder gone: does it still hold the
	// claim at the revision the Duplicate found (kvwindow.Outcome.Revision)? Report Facts.Recheck.
	Recheck
)

// Mark is the set of marks a published output carries.
type Mark uint8

// PossibleDuplicate: the output may be a second copy of its event (header Dedupe-Possible-Duplicate).
const PossibleDuplicate Mark = 1

// Dead is a dead-letter reason.
type Dead uint8

const (
	_                Dead = iota
	DeadMalformed         // inspection's own reason (bad subject, tenant, source, control header)
	DeadBadClaim          // the window refused the claim as invalid
	DeadOutputReject      // the output stream can never store the event
)

// Count is what an acknowledged envelope counts as (dedupeworker_envelopes_total{outcome}).
type Count uint8

const (
	_ Count = iota
	CountUnique
	CountUnkeyed
	CountDuplicate
	CountDeadLetter
)

// NakReason is why a delivery is handed back (dedupeworker_naks_total{reason}).
type NakReason uint8

const (
	_             NakReason = iota
	NakShutdown             // the worker is shutting down
	NakWindow               // the window could not decide (claim or release)
	NakPublish              // the output stream did not take the event (or the duplicate's copy)
	NakDeadLetter           // the dead-letter stream did not take the dead letter
	NakHeld                 // held past the hold bound or across a pause
	NakHolder               // a copy whose claim's holder has not published yet
	NakRecord               // published, but the record before the ack failed
)

// StopReason is why a delivery stops.
type StopReason uint8

const (
	// Done: the delivery was acknowledged or handed back.
	Done StopReason = iota
	// StaleDelivery: a later delivery of the envelope holds its claim (claim status Stale) and decides.
	StaleDelivery
	// Superseded: the dead letter is stored, but the release found the key moved on: a later delivery holds
	// the claim (or it lapsed), and the envelope is left to it.
	Superseded
)

// Note is what the executor logs or counts beside a step.
type Note uint8

const (
	_ Note = iota
	// NotePossibleDuplicate, with Publish: publishing a takeover whose first claim is older than the output
	// remembers (dedupeworker_possible_duplicates_total, warn).
	NotePossibleDuplicate
	// NoteStoredTwice: the event was stored after the claim moved on while this delivery was held too long or
	// across a pause: the output may hold it twice (dedupeworker_possible_duplicates_total, warn).
	NoteStoredTwice
	// NoteMovedOn: stored, but the claim moved on before the record (debug).
	NoteMovedOn
	// NoteUnrecorded: stored, the ack unconfirmed and the record failed: a redelivery after the duplicate window
	// will be published again, marked (warn).
	NoteUnrecorded
	// NoteCopyRefused: the duplicate's copy was refused for good; the duplicate is counted only (warn).
	NoteCopyRefused
	// NoteUnknownStatus: the window answered an unknown claim status (error).
	NoteUnknownStatus
	// NoteHeld, with a Nak for NakHeld: the delivery is handed back instead of published (warn).
	NoteHeld
)

// NakDelay is the redelivery delay of an envelope handed back after delivered attempts: 250ms, doubling, at most
// 5s.
func NakDelay(delivered uint64) time.Duration {
	const first, limit = 250 * time.Millisecond, 5 * time.Second
	d := first
	for i := uint64(1); i < delivered && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
