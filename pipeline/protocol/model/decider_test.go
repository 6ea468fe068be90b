package model

// Facts are what one delivery has learned so far, in the order the world answered: the model fills a field when
// the step that asks it runs, and asks the Decider what to do next after each. Everything is comparable, so a
// delivery's facts are part of the explored state.
type Facts struct {
	// Inspected: the envelope was inspected; Unpublishable says the output stream can never take it (its limits,
	// as the worker knows them at that moment).
	Inspected     bool
	Unpublishable bool
	// First: the delivery is the first of its consumer (JetStream's delivery count 1).
	First bool
	// Claim is the claim's answer; Published and PossibleDup qualify it (Owned, Duplicate).
	Claim     ClaimAnswer
	Published bool // Owned: an earlier delivery recorded the publish. Duplicate: the holder's claim says published
	// MayBeStored, with Won or Owned: the claim was made over the release marker of a holder that may have
	// stored the event.
	MayBeStored bool
	PossibleDup bool // Owned: the envelope first claimed the key longer ago than the output's duplicate window
	// Holder is what waiting in this process's memory for a Duplicate's holder found; Input, whether the holder
	// envelope is still in the work-queue input stream.
	Holder HolderAnswer
	Input  Answer
	// Recheck is the key read again after the input lookup found the holder gone: StillHeld when it holds the
	// claim the Duplicate found, at the same revision (the holder finished with a publish: a holder that
	// dead-letters releases first).
	Recheck RecheckAnswer
	// TooOld: the delivery was held past the hold bound or across a pause of its process. The model sets it at
	// the moment it asks, from the world's clock.
	TooOld bool
	// InputKeeps: the input stream keeps acknowledged envelopes (no holder lookup by absence).
	InputKeeps bool
	// Forward: the deployment forwards a keyed envelope unkeyed when the window cannot answer its claim
	// (DEDUPE_FORWARD_WHEN_WINDOW_DOWN). Forwarded: the delivery built that unkeyed output (Unpublishable is then
	// the unkeyed output's).
	Forward    bool
	Forwarded  bool
	Publish    Result // OK: stored (or collapsed) and acknowledged; Refused: never storable; Failed: anything else
	Ack        Result // OK: confirmed; Failed: unconfirmed (applied or not)
	Record     Result // OK; Moved: the key moved on; Failed
	Release    Result // OK; Moved: the key moved on; Failed
	DeadLetter Result // OK; Failed
}

// ClaimAnswer is the window's answer to a claim.
type ClaimAnswer uint8

const (
	ClaimNone ClaimAnswer = iota
	ClaimFailed
	Won
	Owned
	Duplicate
	Stale
	DeadLettered // the key holds this envelope's own release marker: an earlier delivery dead-lettered it
)

// RecheckAnswer is what reading the key again found.
type RecheckAnswer uint8

const (
	RecheckNone RecheckAnswer = iota
	StillHeld
	NoLongerHeld
	RecheckFailed
)

func (c ClaimAnswer) String() string {
	return [...]string{"-", "failed", "won", "owned", "duplicate", "stale", "its own release marker (dead-lettered)"}[c]
}

// HolderAnswer is what waiting in memory for a Duplicate's holder found.
type HolderAnswer uint8

const (
	HolderNotAsked    HolderAnswer = iota
	HolderNotHere                  // no delivery of this process holds the claim
	HolderPublished                // the holder here finished, its event stored
	HolderUnpublished              // the holder here finished without storing it
	HolderTimedOut                 // the holder here did not finish within the wait
)

// Answer is the input stream's answer about the holder envelope.
type Answer uint8

const (
	InputNotAsked Answer = iota
	InputGone
	InputPresent
)

// Result is the result of one effect.
type Result uint8

const (
	None Result = iota
	OK
	Moved
	Refused
	Failed
)

func (r Result) String() string { return [...]string{"-", "ok", "moved", "refused", "failed"}[r] }

// Kind is what the delivery does next.
type Kind uint8

const (
	Inspect Kind = iota + 1
	Claim
	WaitHolder
	LookupInput
	Recheck
	Publish
	Record
	Ack
	Release
	DeadLetter
	Nak
	Stop // nothing more: the delivery ends without an ack or a NAK
)

func (k Kind) String() string {
	return [...]string{"?", "inspect", "claim", "wait for holder", "look up input", "read the key again", "publish", "record", "ack", "release", "dead letter", "nak", "stop"}[k]
}

// Action is the next step of one delivery: Unkeyed with Inspect builds the unkeyed output, to forward the envelope
// without a claim; Marked with Publish marks the output Dedupe-Possible-Duplicate; Reason names a NAK's metric reason. With Release, Named leaves a release marker naming the envelope (a release without
// it leaves an anonymous marker, as the worker before the decision core did) and MayBeStored says in it that the
// event may be stored.
type Action struct {
	Kind        Kind
	Unkeyed     bool
	Marked      bool
	Reason      string
	Named       bool
	MayBeStored bool
}

// Decider is the decision core as the model drives it: given what a delivery has learned, its next step. It must be
// a pure function of its argument.
type Decider interface {
	Next(f Facts) Action
}

// DeciderFunc adapts a function to Decider.
type DeciderFunc func(Facts) Action

func (d DeciderFunc) Next(f Facts) Action { return d(f) }
