package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natsreq"
)

// Window is the claim window: one JetStream KV bucket, or Config.Shards buckets with each key in exactly one of
// them. It is safe for concurrent use and keeps no per-key state: every claim lives in a bucket.
type Window struct {
	cfg    Config
	shards []*shard
	req    *natsreq.Mux // the answer subscription of every bucket's claims and reads
	closed atomic.Bool  // set by Close: every bucket refuses calls
}

// New binds to the window's bucket(s), creating what is missing when cfg.Provision is set; an existing bucket is
// never modified. It fails when a bucket is missing and provisioning is off, when one cannot carry per-key TTLs
// (the error says how to fix it), when the buckets were created for another number of shards, and with
// ErrWindowLost when a shard bucket is missing while a sibling holds claims (it is never created then).
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Window, error) {
	return open(ctx, js, cfg, false)
}

// open is New; with manage (NewManager) a shard bucket missing beside its siblings is bound as lost (lostShard).
func open(ctx context.Context, js jetstream.JetStream, cfg Config, manage bool) (*Window, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("kvwindow: jetstream: must not be nil")
	}
	mayCreate, err := survey(ctx, js, cfg)
	var absent map[int]bool // shards bound as lost (manage only)
	var lostErr *missingShards
	if manage && errors.As(err, &lostErr) {
		mayCreate, absent, err = make([]bool, cfg.Shards), lostErr.shards, nil
	}
	if err != nil {
		return nil, err
	}
	// One answer subscription serves the claims of every bucket (see internal/natsreq): it lives as long as the
	// connection, as nats.go's own request subscription does.
	req, err := natsreq.New(js.Conn())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	w := &Window{cfg: cfg, req: req}
	for i := range cfg.Shards {
		sc := cfg
		sc.Bucket = ShardBucket(cfg.Bucket, cfg.Shards, i)
		var s *shard
		if absent[i] {
			s, err = lostShard(js, sc, lostErr), nil
		} else {
			s, err = newShard(ctx, js, sc, bucketConfig(cfg, i), mayCreate[i])
		}
		if err != nil {
			_ = req.Close()
			return nil, err
		}
		s.req, s.closed = req, &w.closed
		w.shards = append(w.shards, s)
	}
	return w, nil
}

// Close ends the window: every later call fails at once (ErrUnavailable), calls under way within their timeout.
// Close after Close does nothing. The connection is the caller's and stays open.
func (w *Window) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	return w.req.Close()
}

// shardOf is the shard holding a KV key: FNV-1a of the key, modulo the number of shards (stable across versions:
// changing it moves every key).
func (w *Window) shardOf(kvKey string) *shard {
	if len(w.shards) == 1 {
		return w.shards[0]
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(kvKey))
	return w.shards[h.Sum64()%uint64(len(w.shards))]
}

// claimShard is the shard of c's key. With more than one, c is checked first (its KV key picks the shard); a
// single shard checks c itself.
func (w *Window) claimShard(c Claim) (*shard, error) {
	if len(w.shards) == 1 {
		return w.shards[0], nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return w.shardOf(string(appendKVKey(nil, c.Tenant, c.Source, c.Key))), nil
}

// Bucket is the window's bucket name (with shards: the name the shard buckets are derived from).
func (w *Window) Bucket() string { return w.cfg.Bucket }

// Buckets are the names of the window's buckets, in shard order.
func (w *Window) Buckets() []string {
	out := make([]string, len(w.shards))
	for i, s := range w.shards {
		out[i] = s.cfg.Bucket
	}
	return out
}

// BucketOf is the bucket that holds (or would hold) the claim on (tenant, source, key).
func (w *Window) BucketOf(tenant, source, key string) (string, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return "", err
	}
	return w.shardOf(k).cfg.Bucket, nil
}

// Claim records that c's event was seen, with one atomic create of the key's subject in its bucket (expecting no
// message, or the marker it writes over; TTL c.TTL). It returns Won when this call created the claim and Duplicate
// when another envelope holds it. For c's own envelope (a redelivery) the latest delivery wins: the same delivery
// gets Owned with the stored revision, a later one takes the claim over (rewriting it at the stored revision with
// the full TTL, keeping its first claim time, publish record and MayBeStored) and gets Owned with the new revision,
// an earlier one gets Stale. The envelope's own release marker gives DeadLettered and is left as it is; another
// envelope's is claimed over (Won, with its MayBeStored). known may decide a refused create without a read (see
// Known). Any error means the window could not decide: it wraps ErrUnavailable (or ErrInvalid for a bad claim)
// and is never a "not a duplicate".
func (w *Window) Claim(ctx context.Context, c Claim, known Known) (Outcome, error) {
	s, err := w.claimShard(c)
	if err != nil {
		return Outcome{}, err
	}
	return s.Claim(ctx, c, known)
}

// Get returns the live claim on (tenant, source, key), read from its bucket's stream leader.
func (w *Window) Get(ctx context.Context, tenant, source, key string) (Entry, bool, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return Entry{}, false, err
	}
	return w.shardOf(k).getKey(ctx, k, tenant, source, key)
}

// Release gives up the claim c's delivery holds after dead-lettering its event: rev is the revision its Claim
// returned with Won or Owned. One write expected at rev replaces the claim by a release marker naming c's envelope,
// with c.TTL, so it never replaces a claim made since. The marker is no claim (Get and List skip it): another
// envelope claims over it, c's envelope gets DeadLettered. mayBeStored (the releasing delivery took the claim over)
// makes the claim written over it report Outcome.MayBeStored. It reports false when the key had moved on, which is
// not an error. Errors wrap ErrUnavailable (or ErrInvalid, rev 0 included); after a timeout the release may still
// have happened. Like MarkPublished, it writes under an age limit shorter than c.TTL.
func (w *Window) Release(ctx context.Context, c Claim, rev uint64, mayBeStored bool) (bool, error) {
	s, err := w.claimShard(c)
	if err != nil {
		return false, err
	}
	return s.Release(ctx, c, rev, mayBeStored)
}

// MarkPublished records in the claim that c's event was published, while the claim is still at revision rev (from
// Claim or an earlier mark): a later delivery of the envelope then gets Owned with Published, a copy Duplicate with
// Published. It returns the new revision, or false when the key moved on. The TTL starts again; the first claim
// time is kept (firstClaimed, as Claim returned it; zero reads it from the claim first). Unlike Claim, it writes
// under an age limit shorter than c.TTL: the claim is held already and lapses at the limit either way, and refusing
// the mark would only have the event published again once the limit is lifted.
func (w *Window) MarkPublished(ctx context.Context, c Claim, rev uint64, firstClaimed time.Time) (uint64, bool, error) {
	s, err := w.claimShard(c)
	if err != nil {
		return 0, false, err
	}
	return s.MarkPublished(ctx, c, rev, firstClaimed)
}

// Ping checks that every bucket answers and is still the bucket New bound to (one stream info request each, all at
// once, each bounded by Config.Timeout): a bucket deleted or created again fails with ErrWindowLost, and so does
// every later claim in it; one whose age limit is shorter than the longest claim TTL it must hold, ErrAgeLimit.
// Every bucket is checked, so that each is flagged whatever the others answer; pingVerdict picks the error.
func (w *Window) Ping(ctx context.Context) error {
	_, err := w.PingEach(ctx)
	return err
}
