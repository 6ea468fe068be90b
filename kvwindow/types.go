package kvwindow

import (
	"errors"
	"fmt"
	"time"
)

// Claimant identifies the envelope that makes a claim: its sequence in the input stream and the time the stream
// stored it (JetStream's message timestamp). Together they stay unique when the input stream is deleted and
// re-created (sequences restart at 1; timestamps do not repeat).
type Claimant struct {
	Seq   uint64
	Stamp int64 // unix nanoseconds of the stored message
}

// Delivery orders the deliveries of one envelope: first by the consumer's creation time (a re-created consumer
// restarts its delivery counts), then by JetStream's delivery count.
type Delivery struct {
	Consumer int64  // unix nanoseconds of the consumer's creation time (ConsumerInfo.Created)
	Count    uint64 // delivery count (1 = first delivery)
}

// Before reports whether d is an earlier delivery than o.
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
	// claimant and so recognises the claim as its own.
	Claimant Claimant
	// Delivery is which delivery of the envelope makes the claim: of the envelope's deliveries the latest holds the
	// claim (see Window.Claim). A first delivery (Count 1) cannot own a claim, so its losing create is read back by
	// direct get from any replica (far cheaper for the server): a stale answer can only take an expiring claim for
	// a live one.
	Delivery Delivery
}

// Known is a claim the caller made and published itself, remembered in memory: its revision (the caller's latest
// write on the key, the publish mark if there was one) and its claimant. When a create is refused because the
// key's last revision is exactly Revision, the claim is a Duplicate of that published claim, decided from the
// refusal alone (a revision names one write of the bucket); any other answer is decided as without it. The zero
// Known asks nothing.
type Known struct {
	Revision uint64
	Claimant Claimant
}

// Status is what a claim found.
type Status int

const (
	// Won means the key was free and is now claimed by this claimant.
	Won Status = iota + 1
	// Owned means the key was already claimed by this same claimant (a redelivery, to be published again); this
	// delivery now holds the claim: it made it itself (same revision) or took it over (a new revision).
	Owned
	// Duplicate means another envelope holds the claim: this one is a copy of an event already seen.
	Duplicate
	// Stale means the claim is this envelope's, but a later delivery of it holds the claim. The caller must do
	// nothing with this delivery: the later delivery publishes.
	Stale
	// DeadLettered means the key holds this envelope's own release marker (Release): nothing was written; the
	// caller acknowledges the envelope.
	DeadLettered
)

var statusNames = [...]string{Won: "won", Owned: "owned", Duplicate: "duplicate", Stale: "stale", DeadLettered: "dead-lettered"}

func (s Status) String() string {
	if s < Won || int(s) >= len(statusNames) {
		return "unknown"
	}
	return statusNames[s]
}

// Outcome is the result of a claim.
type Outcome struct {
	Status Status
	// Revision is the KV revision of the claim (for Won and Owned: the one this delivery holds, to pass to Release;
	// for Duplicate: the other envelope's; for Stale: the later delivery's). A takeover gives the claim a new
	// revision, so an id that must stay the same across deliveries (a Nats-Msg-Id) cannot be built from it.
	Revision uint64
	// Published, with Owned, says that an earlier delivery recorded the publish (MarkPublished): it need not be
	// published again. With Duplicate it says that the holder's outcome is decided: its claim records the publish
	// (or the key holds a value that is no claim, which never will). Without it the holder may still release the
	// claim: acknowledging a copy now could lose the event.
	Published bool
	// FirstClaimed is when the envelope holding the claim first claimed the key (the claiming worker's clock, in
	// milliseconds), kept across takeovers and marks, so that a takeover can tell whether an earlier delivery may
	// have published longer ago than the output remembers (for a value that is no claim: when it was stored).
	FirstClaimed time.Time
	// MayBeStored, with Won or Owned: the claim was made over the release marker of another envelope's delivery
	// that may have stored the event before it was refused (see Release): publish marked as a possible duplicate.
	MayBeStored bool
	// HolderSeq and HolderStamp, with Duplicate, identify the envelope that holds the claim (as in Claimant).
	HolderSeq   uint64
	HolderStamp int64
}

// Entry describes a claim held in the window.
type Entry struct {
	Tenant, Source, Key string
	// Bucket is the bucket that holds the claim (with shards: the shard's), and KVKey the key under which it
	// stores it (see KVKey): `nats kv get|history <Bucket> <KVKey>` shows it.
	Bucket    string
	KVKey     string
	Claimant  Claimant
	Delivery  Delivery
	Revision  uint64
	ClaimedAt time.Time // when the server stored the claim's latest write
	TTL       time.Duration
	// FirstClaimed is when the envelope first claimed the key (kept across takeovers and marks).
	FirstClaimed time.Time
	// Published says the claim records that its event was published (MarkPublished).
	Published bool
}

// ExpiresAt is when the claim lapses.
func (e Entry) ExpiresAt() time.Time { return e.ClaimedAt.Add(e.TTL) }

// ErrUnavailable is wrapped by every error that means the window could not decide (timeout, no responders,
// bucket full, connection closed). It is never a "not a duplicate": callers retry later.
var ErrUnavailable = errors.New("kvwindow: window unavailable")

// ErrWindowLost is wrapped by every error that means a window bucket was deleted, or created again, under the
// running worker (or is missing beside its sibling shards at New): its claims are gone. It wraps ErrUnavailable
// and does not pass by itself: the bucket refuses every claim until the worker is restarted after the operator
// decided (OPERATIONS.md, "The window bucket was lost or re-created").
var ErrWindowLost = fmt.Errorf("%w: bucket lost", ErrUnavailable)

// ErrAgeLimit is wrapped by every error that means a window bucket's age limit (its stream's max_age) is shorter
// than a claim TTL it must hold. It wraps ErrUnavailable but is a misconfiguration, not an outage: it passes only
// once the operator raises or removes the limit, and a caller that forwards envelopes undeduplicated while the
// window is down must not do so for it (forwarding would publish every copy).
var ErrAgeLimit = fmt.Errorf("%w: age limit shorter than a claim TTL", ErrUnavailable)

// ErrEvicting is wrapped by every error that means a window bucket's stream was edited under the running window to
// discard old messages, which evicts live claims once the bucket is full. Like ErrAgeLimit it is a
// misconfiguration: it passes only once the operator puts discard new back, and a caller must not forward
// envelopes undeduplicated for it.
var ErrEvicting = fmt.Errorf("%w: bucket discards old claims", ErrUnavailable)

// BucketError is an error of one of the window's buckets, with the bucket as data (Bucket) beside what happened
// (Err, which wraps the package's sentinels: errors.Is sees through it). Its text is Err's, which names the bucket
// or the key.
type BucketError struct {
	Bucket string
	Err    error
}

func (e *BucketError) Error() string { return e.Err.Error() }
func (e *BucketError) Unwrap() error { return e.Err }
