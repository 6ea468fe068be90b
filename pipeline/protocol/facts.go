package protocol

import "time"

// Facts is what is known of one delivery so far: what inspection found, the deployment's settings, and the result
// of every step carried out. The zero value of each result means "not tried yet".
type Facts struct {
	// Kind is what inspection found.
	Kind Kind
	// Delivered is JetStream's delivery count (1 = first delivery): it sets the NAK delays.
	Delivered uint64
	// Config holds the deployment's settings that decisions depend on.
	Config Config
	// Hold is how long the delivery has been held and whether the process paused since it arrived; the executor
	// refreshes it before every decision.
	Hold Hold

	Output     Output        // Build's result
	Claim      ClaimResult   // Claim's result
	Holder     HolderResult  // WaitHolder's result
	Input      InputResult   // LookupInput's result
	Recheck    RecheckResult // Recheck's result
	Publish    PublishResult // Publish's result
	Copy       PublishResult // PublishCopy's result
	DeadLetter PublishResult // DeadLetter's result (PublishRefused counts as PublishFailed)
	Release    ReleaseResult // Release's result
	Record     RecordResult  // Record's result
	Ack        AckResult     // Ack's result
	Naked      bool          // a Nak was sent
}

// Kind is what inspection found in an envelope, before any round trip.
type Kind uint8

const (
	_ Kind = iota
	// Keyed: the envelope has an event key and claims it.
	Keyed
	// Unkeyed: the envelope is forwarded without a claim (no dedupe, no key, unverified, …).
	Unkeyed
	// Malformed: the envelope can never be processed (bad subject, tenant or source, shaped like a server status
	// message): it is dead-lettered.
	Malformed
)

// Config is the deployment's part of the facts.
type Config struct {
	// ForwardWhenWindowDown forwards a keyed envelope unkeyed when the window cannot decide (not when it is lost).
	ForwardWhenWindowDown bool
	// CopyDuplicates publishes a copy of each duplicate (DuplicatesPrefix is set).
	CopyDuplicates bool
	// InputKeeps says the input stream keeps acknowledged envelopes (not a work queue): a copy cannot tell a
	// finished holder by its absence, so the holder records its publish before its ack.
	InputKeeps bool
	// DupWindow is the output stream's duplicate window (0: unknown or none); PublishTimeout bounds a publish.
	DupWindow, PublishTimeout time.Duration
}

// Hold is how long the delivery has been held, against the bound, and whether the process paused meanwhile.
type Hold struct {
	Held, Bound time.Duration
	// Paused: the process was stopped (frozen) after the delivery arrived.
	Paused bool
}

// TooOld reports whether the delivery must no longer be published: held past the bound, or across a pause.
func (h Hold) TooOld() bool { return h.Held > h.Bound || h.Paused }

// Output is what Build found: which output was built and whether the output stream can ever store it.
type Output struct {
	Built Built
	// Unstorable: the output is over a size limit of the server or of the output stream.
	Unstorable bool
}

// Built says which output Build built.
type Built uint8

const (
	NotBuilt Built = iota
	BuiltKeyed
	BuiltUnkeyed
)

// ClaimResult is what the window answered to the claim.
type ClaimResult struct {
	Status ClaimStatus
	// Published: with Owned, an earlier delivery recorded its publish; with Duplicate, the holder's outcome is
	// decided.
	Published bool
	// HolderKnown, with Duplicate: the claim names its holder's envelope, so the input stream can be asked for it.
	HolderKnown bool
	// FirstClaimAge is how long ago the envelope holding the claim first claimed the key (AgeKnown false when the
	// window did not say).
	FirstClaimAge time.Duration
	AgeKnown      bool
	// MayBeStored, with Won or Owned: the claim was made over the release marker of another envelope's holder
	// that may have stored the event before it was refused (a takeover: an earlier delivery of that envelope may
	// have published unrecorded); the claim keeps it across takeovers. This delivery publishes marked as a
	// possible duplicate.
	MayBeStored bool
}

// ClaimStatus is the claim's answer: a window decision, or why there is none.
type ClaimStatus uint8

const (
	NotClaimed       ClaimStatus = iota
	Won                          // the key was free and is now this delivery's
	Owned                        // the key was already the envelope's: this delivery holds it now (takeover or retry)
	Duplicate                    // another envelope holds the key
	Stale                        // a later delivery of this envelope holds the key
	ClaimInvalid                 // the window refused the claim as invalid
	ClaimUnavailable             // the window could not decide
	ClaimLost                    // the window's bucket was lost, or its age limit cannot hold the claim: no decision until an operator acts
	ClaimCancelled               // the claim failed because the worker is shutting down
	ClaimUnknown                 // the window answered a status this protocol does not know
	// DeadLettered: the key holds this envelope's own release marker: an earlier delivery dead-lettered the event
	// and released its claim. Nothing is claimed; the envelope's outcome is that dead letter.
	DeadLettered
)

// HolderResult is what waiting in memory for a Duplicate's holder found.
type HolderResult uint8

const (
	HolderNotAsked    HolderResult = iota
	HolderNotHere                  // no worker of this process holds the claim
	HolderPublished                // the holder here finished and its event is stored
	HolderUnpublished              // the holder here finished without storing the event (handed back, dead-lettered)
	HolderTimedOut                 // the holder here did not finish within the wait (or shutdown ended the wait)
)

// InputResult is what asking the input stream for a Duplicate's holder envelope found.
type InputResult uint8

const (
	InputNotAsked InputResult = iota
	InputGone                 // the holder envelope is no longer in the (work-queue) input stream: acknowledged
	InputPresent              // it is still there: undecided
	InputFailed               // no answer
)

// RecheckResult is what reading the key again found, once the input lookup found a Duplicate's holder gone.
type RecheckResult uint8

const (
	NotRechecked RecheckResult = iota
	// StillHeld: the key still holds the claim at the revision the Duplicate found. The holder left the input
	// while holding it, so it finished published: a holder that dead-letters releases its claim first.
	StillHeld
	// NoLongerHeld: the key holds another revision, or nothing. The holder may have dead-lettered and released
	// the claim after the Duplicate read it; or another delivery claimed, took over or recorded since.
	NoLongerHeld
	RecheckFailed // no answer
)

// PublishResult is the output stream's answer to a publish.
type PublishResult uint8

const (
	NotPublished     PublishResult = iota
	PublishStored                  // JetStream acknowledged it
	PublishFailed                  // no answer, or refused for now (full, unavailable, timeout): may or may not be stored
	PublishRefused                 // refused for good (over a size limit)
	PublishCancelled               // failed because the worker is shutting down: may or may not be stored
)

// ReleaseResult is the window's answer to a release.
type ReleaseResult uint8

const (
	NotReleased   ReleaseResult = iota
	Released                    // the claim was this delivery's and is removed
	ReleaseMoved                // the key holds another revision: a later delivery took the claim over, or it lapsed
	ReleaseFailed               // the window could not decide
)

// RecordResult is the window's answer to recording the publish in the claim.
type RecordResult uint8

const (
	NotRecorded  RecordResult = iota
	Recorded                  // the claim records the publish
	RecordMoved               // the key holds another revision: a later delivery took over, or the claim lapsed
	RecordFailed              // the window could not decide
)

// AckResult is the server's answer to the ack.
type AckResult uint8

const (
	NotAcked       AckResult = iota
	AckConfirmed             // the consumer took the ack
	AckUnconfirmed           // no confirmation (timeout, no consumer, connection error): it may be lost
)
