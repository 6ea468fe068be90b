package kvwindow

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stats reports what claims ran into, over every bucket: 10071 and 10164 answers, markers written over, and reads
// that found nothing.
func Stats(w *Window) (w10071, w10164, markers, empty uint64) {
	for _, s := range w.shards {
		w10071 += s.stats.wrongSeq10071.Load()
		w10164 += s.stats.wrongSeq10164.Load()
		markers += s.stats.markers.Load()
		empty += s.stats.empty.Load()
	}
	return
}

// KnownDuplicates counts the duplicates decided by Claim's known argument, without a read.
func KnownDuplicates(w *Window) uint64 {
	var n uint64
	for _, s := range w.shards {
		n += s.stats.known.Load()
	}
	return n
}

// Takeovers counts the takeover writes claims attempted: a later delivery replacing an earlier one's claim.
func Takeovers(w *Window) uint64 {
	var n uint64
	for _, s := range w.shards {
		n += s.stats.takeovers.Load()
	}
	return n
}

// Backoffs reports how often claims backed off before writing again, and for how long in all.
func Backoffs(w *Window) (n uint64, total time.Duration) {
	for _, s := range w.shards {
		n += s.stats.backoffs.Load()
		total += time.Duration(s.stats.backoffNanos.Load())
	}
	return n, total
}

// SetReadHook makes every claim read of a subject for which empty returns true find the key empty (nil: reads as
// they are), as a claim that expired between the write and the read would.
func SetReadHook(w *Window, empty func(subj string) bool) {
	for _, s := range w.shards {
		s.readHook = empty
	}
}

// Value is a decoded claim value.
type Value struct {
	Claimant  Claimant
	Delivery  Delivery
	FirstMs   int64
	Published bool
	Key       string
}

// EncodeValue is the compact value a claim of c first claimed at firstMs stores.
func EncodeValue(c Claim, firstMs int64, published bool) []byte {
	var flags byte
	if published {
		flags = flagPublished
	}
	return appendClaimValue(nil, c, firstMs, flags)
}

// DecodeValue reads a stored claim value.
func DecodeValue(b []byte) (Value, bool) {
	v, ok := decodeClaimValue(b)
	return Value{Claimant: v.Claimant, Delivery: v.Delivery, FirstMs: v.First, Published: v.Pub, Key: v.Key}, ok
}

// ScopeOf splits a KV key (see scopeOf).
func ScopeOf(kvKey string) (tenant, source, key string, ok bool) { return scopeOf(kvKey) }

// ManagerOf is the operators' calls on w's buckets (NewManager, for a window a test already holds).
func ManagerOf(w *Window) *Manager { return &Manager{w: w} }

// BucketProblems decides whether a bucket's stream configuration can hold claims of up to maxTTL (see
// bucketProblems).
func BucketProblems(c jetstream.StreamConfig, maxTTL time.Duration) (problems []string, recreate bool) {
	return bucketProblems(c, maxTTL)
}

// RecreatedAck is recreatedAck: whether a write acknowledged in ackStream at seq, sent when the bucket's stream had
// reached seen, proves the bucket was created again.
func RecreatedAck(stream, ackStream string, seq, seen uint64) bool {
	return recreatedAck(stream, []byte(ackStream), seq, seen)
}

// AckLoss is ackLoss: why a write acknowledged at or below the sequence seen shows the bucket's claims lost.
func AckLoss(stream, ackStream string, seq, seen uint64, bound, now time.Time, readErr error) string {
	return ackLoss(stream, []byte(ackStream), seq, seen, bound, now, readErr)
}

// PingVerdict is pingVerdict: what a Ping of buckets that answered errs (in shard order) returns.
func PingVerdict(errs []error) error {
	each := make([]BucketPing, len(errs))
	for i, err := range errs {
		each[i].Err = err
	}
	return pingVerdict(each)
}

// AgeCheck is the age-limit check every claim passes before it is written (shard.holds), on the shard of c.
func AgeCheck(w *Window, c Claim) error { return w.shards[0].holds(c) }

// StepDown is the step-down Rebalance makes for one move, on its own: the move as made, and an error when the
// stream elected another server than m.To.
func StepDown(ctx context.Context, m *Manager, mv Move) (Move, error) { return m.w.stepDown(ctx, mv) }

// PlanRebalance is the plan Rebalance makes from a window's status.
var PlanRebalance = planRebalance

// StatusOf is the status Status reports for a bucket whose stream info has cluster info c, keys apart.
func StatusOf(bucket string, c *jetstream.ClusterInfo) BucketStatus {
	b := BucketStatus{Bucket: bucket}
	b.placed(c)
	return b
}

// MarkerTTL is the first bucket's limit marker TTL as found at New.
func (w *Window) MarkerTTL() time.Duration { return w.shards[0].markTTL }

// EvictsClaims is evictsClaims.
var EvictsClaims = evictsClaims
