package kvwindow

import (
	"errors"
	"time"
)

// Claimant identifies the envelope that makes a claim: its sequence in the input stream and the time the stream
// stored it (JetStream's message timestamp). Together they stay unique when the input stream is deleted and
// re-created (sequences restart at 1; timestamps do not repeat).
type Claimant struct {
	Seq   uint64
	Stamp int64 // unix nanoseconds of the stored message; 0 = unknown (a claim written before this field existed)
}

// Delivery orders the deliveries of one envelope: first by the consumer's creation time (a re-created consumer
// restarts its delivery counts), then by JetStream's delivery count.
type Delivery struct {
	Consumer int64  // unix nanoseconds of the consumer's creation time (ConsumerInfo.Created); 0 = unknown
	Count    uint64 // delivery count (1 = first delivery)
}

// Before reports whether d is an earlier delivery than o. An unknown consumer (0, a claim written before this
// field existed) sorts before every known one, so any delivery that knows its consumer takes over such a claim.
func (d Delivery) Before(o Delivery) bool {
	if d.Consumer != o.Consumer {
		return d.Consumer < o.Consumer
	}
	return d.Count < o.Count
}

// Claim asks the window to record that an event was seen.
type Claim struct {
	// Tenant and Source scope the key; both are 1–64 characters of [A-Za-z0-9_-].
	Tenant, Source string
	// Key is the event key as computed by the keys package (at most 200 bytes, any bytes).
	Key string
	// TTL is how long the claim suppresses later copies; whole seconds, at least 1s.
	TTL time.Duration
	// Claimant identifies the envelope that makes the claim. A redelivery of the same envelope carries the same
	// claimant and so recognises the claim as its own. A stored claim without a Stamp (written before Stamp
	// existed) is recognised by Seq alone.
	Claimant Claimant
	// Delivery is which delivery of the envelope makes the claim. When the claim is already the envelope's, the
	// latest delivery holds it: a later delivery takes the claim over (Owned, with a new revision) and an earlier
	// one is told Stale, so that of two deliveries alive at once (a worker that stalled past the ack wait, and
	// the redelivery) only one publishes.
	Delivery Delivery
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
	// claim succeeded but whose outcome was not acknowledged, and it must be published again. This delivery now
	// holds the claim: either it made the claim itself (a retried Claim; same revision) or it took the claim over
	// from an earlier delivery (a new revision).
	Owned
	// Duplicate means another envelope holds the claim: this one is a copy of an event already seen.
	Duplicate
	// Stale means the claim is this envelope's, but a later delivery of it holds the claim. The caller must do
	// nothing with this delivery: the later delivery publishes.
	Stale
)

func (s Status) String() string {
	switch s {
	case Won:
		return "won"
	case Owned:
		return "owned"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Outcome is the result of a claim.
type Outcome struct {
	Status Status
	// Revision is the KV revision of the claim (for Won and Owned: the claim this delivery holds, the one to pass
	// to Release; for Duplicate: the other envelope's claim; for Stale: the later delivery's claim). Together
	// with the idempotency key it identifies one claim. A takeover gives the claim a new revision, so an id that
	// must stay the same across deliveries of one envelope (a Nats-Msg-Id) cannot be built from it.
	Revision uint64
	// Published, with Owned, says that an earlier delivery of this envelope recorded that it published the event
	// (MarkPublished): the event is in the output and need not be published again.
	Published bool
}

// Entry describes a claim held in the window.
type Entry struct {
	Tenant, Source, Key string
	// KVKey is the key under which the bucket stores the claim (see KVKey), for `nats kv get|history`.
	KVKey     string
	Claimant  Claimant
	Delivery  Delivery // zero for a claim written before deliveries were recorded
	Revision  uint64
	ClaimedAt time.Time
	TTL       time.Duration
}

// ExpiresAt is when the claim lapses.
func (e Entry) ExpiresAt() time.Time { return e.ClaimedAt.Add(e.TTL) }

// ErrUnavailable is wrapped by every error that means the window could not decide (timeout, no responders,
// bucket full, connection closed). It is never a "not a duplicate": callers retry later.
var ErrUnavailable = errors.New("kvwindow: window unavailable")
