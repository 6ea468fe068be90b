package kvwindow

import (
	"errors"
	"time"
)

// Claim asks the window to record that an event was seen.
type Claim struct {
	// Tenant and Source scope the key; both are 1–64 characters of [A-Za-z0-9_-].
	Tenant, Source string
	// Key is the event key as computed by the keys package (at most 200 bytes, any bytes).
	Key string
	// TTL is how long the claim suppresses later copies; whole seconds, at least 1s.
	TTL time.Duration
	// Claimant identifies the envelope that makes the claim: its sequence in the input stream. A redelivery of
	// the same envelope carries the same claimant and so recognises the claim as its own.
	Claimant uint64
	// FirstDelivery says the envelope has never been delivered before (JetStream's delivery count is 1), so no
	// earlier attempt of it can hold the claim and Owned is impossible. The window may then read a losing
	// create's claim from any replica (a direct get, far cheaper for the server than a read through the stream
	// leader's API): a stale answer can only mistake an expiring claim for a live one, i.e. suppress a copy of
	// an event already published. Leave it false when unsure; redeliveries always read from the leader.
	FirstDelivery bool
}

// Status is what a claim found.
type Status int

const (
	// Won means the key was free and is now claimed by this claimant.
	Won Status = iota + 1
	// Owned means the key was already claimed by this same claimant: the envelope is a redelivery of one whose
	// claim succeeded but whose outcome was not acknowledged, and it must be published again.
	Owned
	// Duplicate means another envelope holds the claim: this one is a copy of an event already seen.
	Duplicate
)

func (s Status) String() string {
	switch s {
	case Won:
		return "won"
	case Owned:
		return "owned"
	case Duplicate:
		return "duplicate"
	}
	return "unknown"
}

// Outcome is the result of a claim.
type Outcome struct {
	Status Status
	// Revision is the KV revision of the claim (for Won and Owned: the claim this envelope holds; for Duplicate:
	// the other envelope's claim). Together with the idempotency key it identifies one claim, which makes it a
	// good Nats-Msg-Id for the republished event.
	Revision uint64
}

// Entry describes a claim held in the window.
type Entry struct {
	Tenant, Source, Key string
	Claimant            uint64
	Revision            uint64
	ClaimedAt           time.Time
	TTL                 time.Duration
}

// ExpiresAt is when the claim lapses.
func (e Entry) ExpiresAt() time.Time { return e.ClaimedAt.Add(e.TTL) }

// ErrUnavailable is wrapped by every error that means the window could not decide (timeout, no responders,
// bucket full, connection closed). It is never a "not a duplicate": callers retry later.
var ErrUnavailable = errors.New("kvwindow: window unavailable")
