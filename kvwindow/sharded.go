package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Window is the claim window: one JetStream KV bucket, or Config.Shards buckets with each key in exactly one of
// them. It is safe for concurrent use and keeps no per-key state: every claim lives in a bucket.
type Window struct {
	cfg    Config
	shards []*shard
}

// metaShards is the bucket metadata key that records how many shards the window was created with.
const metaShards = "dedupeworker.shards"

// New binds to the window's bucket(s), creating what is missing when cfg.Provision is set. It fails when a bucket
// is missing and provisioning is off, when an existing bucket cannot carry per-key TTLs (the error says how to fix
// it), or when the buckets found were created for another number of shards. An existing bucket is never modified.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Window, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("kvwindow: jetstream: must not be nil")
	}
	if err := checkShards(ctx, js, cfg); err != nil {
		return nil, err
	}
	w := &Window{cfg: cfg}
	for i := range cfg.Shards {
		sc := cfg
		sc.Bucket = ShardBucket(cfg.Bucket, cfg.Shards, i)
		create := jetstream.KeyValueConfig{
			Description:    "dedupeworker claim window",
			History:        1,
			Replicas:       cfg.Replicas,
			Storage:        cfg.Storage,
			MaxBytes:       cfg.MaxBytes,
			LimitMarkerTTL: cfg.MarkerTTL,
		}
		if cfg.Shards > 1 {
			create.Description = fmt.Sprintf("dedupeworker claim window, shard %d of %d", i+1, cfg.Shards)
			create.Metadata = map[string]string{metaShards: strconv.Itoa(cfg.Shards)}
		}
		if len(cfg.Placement) > 0 {
			p := cfg.Placement[i%len(cfg.Placement)]
			create.Placement = &p
		}
		s, err := newShard(ctx, js, sc, create)
		if err != nil {
			return nil, err
		}
		w.shards = append(w.shards, s)
	}
	return w, nil
}

// ShardBucket is the name of bucket i of a window of k shards: the bucket itself when k is 1, else
// "<bucket>-NN".
func ShardBucket(bucket string, k, i int) string {
	if k <= 1 {
		return bucket
	}
	return fmt.Sprintf("%s-%02d", bucket, i)
}

// checkShards refuses buckets created for another number of shards: the single bucket when cfg.Shards > 1,
// sharded buckets when it is 1, or shards recording another count. Keys would otherwise be looked for in the
// wrong bucket, and a duplicate taken for a first delivery.
func checkShards(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	exists := func(bucket string) (*jetstream.StreamInfo, error) {
		octx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		st, err := js.Stream(octx, "KV_"+bucket)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: bucket %q: %w", ErrUnavailable, bucket, err)
		}
		return st.CachedInfo(), nil
	}
	k := cfg.Shards
	recorded := func(info *jetstream.StreamInfo) int {
		n, err := strconv.Atoi(info.Config.Metadata[metaShards])
		if err != nil {
			return 0
		}
		return n
	}
	single, err := exists(cfg.Bucket)
	if err != nil {
		return err
	}
	if k == 1 {
		if single != nil {
			return nil // today's window: no need to look further (nor the permission to)
		}
		// No single bucket (yet): a sharded window under the same name would be taken for an empty one. The probe
		// is best effort: a user allowed only the single bucket's API subjects gets no answer, which is fine.
		if first, err := exists(ShardBucket(cfg.Bucket, 2, 0)); err == nil && first != nil {
			return fmt.Errorf("kvwindow: the window %q is sharded (bucket %s-00 exists, created for %d shards) but shards is 1: "+
				"set DEDUPE_WINDOW_SHARDS to the number of buckets it was created with", cfg.Bucket, cfg.Bucket, recorded(first))
		}
		return nil
	}
	first, err := exists(ShardBucket(cfg.Bucket, 2, 0))
	if err != nil {
		return err
	}
	if single != nil {
		return fmt.Errorf("kvwindow: the window %q is a single bucket but shards is %d: its claims would not be found in "+
			"the shards; keep DEDUPE_WINDOW_SHARDS=1, or move to shards as OPERATIONS.md describes", cfg.Bucket, k)
	}
	if first != nil {
		if n := recorded(first); n != k {
			return fmt.Errorf("kvwindow: the window %q was created with %d shards, not %d: keys are spread by their number, "+
				"so it cannot change in place; set DEDUPE_WINDOW_SHARDS=%d, or move as OPERATIONS.md describes", cfg.Bucket, n, k, n)
		}
	}
	beyond, err := exists(ShardBucket(cfg.Bucket, k+1, k))
	if err != nil {
		return err
	}
	if beyond != nil {
		return fmt.Errorf("kvwindow: the window %q has a bucket %s beyond the %d shards configured: it was created with "+
			"more shards (%d)", cfg.Bucket, ShardBucket(cfg.Bucket, k+1, k), k, recorded(beyond))
	}
	return nil
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

func (w *Window) shardFor(tenant, source, key string) (*shard, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return nil, err
	}
	return w.shardOf(k), nil
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
	s, err := w.shardFor(tenant, source, key)
	if err != nil {
		return "", err
	}
	return s.cfg.Bucket, nil
}

// MarkerTTL is the first bucket's limit marker TTL as found at New.
func (w *Window) MarkerTTL() time.Duration { return w.shards[0].markTTL }

// Claim records that c's event was seen, with one atomic create of the key's subject in its bucket ("expected
// last subject sequence 0", TTL c.TTL). It returns Won when this call created the claim; Owned when the key is
// already claimed by the same envelope (c.Claimant) — taking the claim over when c is a later delivery —; Stale
// when a later delivery of the same envelope holds it; and Duplicate when another envelope holds it. Any error
// means the window could not decide: it wraps ErrUnavailable (or ErrInvalid for a bad claim) and is never a "not a
// duplicate".
func (w *Window) Claim(ctx context.Context, c Claim) (Outcome, error) {
	if len(w.shards) == 1 {
		return w.shards[0].Claim(ctx, c)
	}
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	return w.shardOf(string(appendKVKey(nil, c.Tenant, c.Source, c.Key))).Claim(ctx, c)
}

// Get returns the live claim on (tenant, source, key), read from its bucket's stream leader.
func (w *Window) Get(ctx context.Context, tenant, source, key string) (Entry, bool, error) {
	s, err := w.shardFor(tenant, source, key)
	if err != nil {
		return Entry{}, false, err
	}
	return s.Get(ctx, tenant, source, key)
}

// Release gives up the claim this delivery holds on (tenant, source, key) while it is still at revision rev; see
// shard.Release.
func (w *Window) Release(ctx context.Context, tenant, source, key string, rev uint64) (bool, error) {
	s, err := w.shardFor(tenant, source, key)
	if err != nil {
		return false, err
	}
	return s.Release(ctx, tenant, source, key, rev)
}

// MarkPublished records in the claim c made (at revision rev) that its event was published; see shard.MarkPublished.
func (w *Window) MarkPublished(ctx context.Context, c Claim, rev uint64) (bool, error) {
	if len(w.shards) == 1 {
		return w.shards[0].MarkPublished(ctx, c, rev)
	}
	if err := c.Validate(); err != nil {
		return false, err
	}
	return w.shardOf(string(appendKVKey(nil, c.Tenant, c.Source, c.Key))).MarkPublished(ctx, c, rev)
}

// Forget removes the claim on (tenant, source, key) by purging the key's subject, so that the next copy of the
// event is admitted. It returns 1 if there was a live claim, else 0.
func (w *Window) Forget(ctx context.Context, tenant, source, key string) (int, error) {
	s, err := w.shardFor(tenant, source, key)
	if err != nil {
		return 0, err
	}
	return s.Forget(ctx, tenant, source, key)
}

// ForgetAll removes every claim of tenant and source (source "" = the whole tenant) with one subject-filtered
// purge per bucket; it never lists a bucket. It returns the number of keys purged: live claims, plus keys whose
// claim expired less than the marker TTL ago (their marker is purged too).
func (w *Window) ForgetAll(ctx context.Context, tenant, source string) (int, error) {
	if err := validateScope(tenant, source, true); err != nil {
		return 0, err
	}
	total := 0
	for _, s := range w.shards {
		n, err := s.ForgetAll(ctx, tenant, source)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// List returns up to limit live claims of tenant (and of source; "" = every source of the tenant), bucket by
// bucket and in revision order within a bucket, starting at from (0: the first). next is what to pass as from for
// the next page, 0 when there is none; with shards it carries the bucket in its top byte. It reads each bucket's
// stream with a short-lived ordered consumer filtered on the scope, so its cost is the scope's claims (and expiry
// markers), never whole buckets; a claim taken over or released meanwhile may be missed or listed at its new
// revision. Errors wrap ErrUnavailable (or ErrInvalid for a bad scope or limit).
func (w *Window) List(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
	if err := validateScope(tenant, source, true); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxList {
		return nil, 0, fmt.Errorf("%w: limit: must be between 1 and %d, got %d", ErrInvalid, MaxList, limit)
	}
	const shardBits = 56
	first, rev := int(from>>shardBits), from&(1<<shardBits-1)
	if first >= len(w.shards) {
		return nil, 0, fmt.Errorf("%w: from: no shard %d", ErrInvalid, first)
	}
	for i := first; i < len(w.shards); i++ {
		es, nx, err := w.shards[i].list(ctx, tenant, source, rev, limit-len(entries))
		if err != nil {
			return nil, 0, err
		}
		rev = 0
		entries = append(entries, es...)
		if nx != 0 {
			return entries, uint64(i)<<shardBits | nx, nil
		}
		if len(entries) == limit {
			// The page is full: the next one starts at the next bucket (if it holds any of the scope's claims).
			if i+1 < len(w.shards) {
				return entries, uint64(i+1) << shardBits, nil
			}
			return entries, 0, nil
		}
	}
	return entries, 0, nil
}

// Ping checks that every bucket answers (one stream info request each); errors wrap ErrUnavailable.
func (w *Window) Ping(ctx context.Context) error {
	for _, s := range w.shards {
		if err := s.Ping(ctx); err != nil {
			return err
		}
	}
	return nil
}
