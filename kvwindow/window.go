package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
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

// Bucket metadata keys recording, on every shard bucket, how many shards the window was created with and which
// one the bucket is.
const (
	metaShards = "dedupeworker.shards"
	metaShard  = "dedupeworker.shard"
)

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

// bucketConfig is what New creates bucket i of the window with.
func bucketConfig(cfg Config, i int) jetstream.KeyValueConfig {
	create := jetstream.KeyValueConfig{
		Bucket:         ShardBucket(cfg.Bucket, cfg.Shards, i),
		Description:    "dedupeworker claim window",
		History:        1,
		Replicas:       cfg.Replicas,
		Storage:        cfg.Storage,
		MaxBytes:       cfg.MaxBytes,
		LimitMarkerTTL: cfg.MarkerTTL,
	}
	if cfg.Shards > 1 {
		create.Description = shardDescription(i, cfg.Shards)
		create.Metadata = map[string]string{metaShards: strconv.Itoa(cfg.Shards), metaShard: strconv.Itoa(i)}
	}
	if len(cfg.Placement) > 0 {
		p := cfg.Placement[i%len(cfg.Placement)]
		create.Placement = &p
	}
	return create
}

// shardDescription is shard i's bucket description. It records the shard and the count too, so that a bucket
// created by hand with `nats kv add --description` (which cannot set metadata) still says what it is.
func shardDescription(i, k int) string {
	return fmt.Sprintf("dedupeworker claim window, shard %d of %d", i+1, k)
}

// ShardBucket is the name of bucket i of a window of k shards: the bucket itself when k is 1, else
// "<bucket>-NN".
func ShardBucket(bucket string, k, i int) string {
	if k <= 1 {
		return bucket
	}
	return fmt.Sprintf("%s-%02d", bucket, i)
}

// survey looks at every bucket the window may have and decides which missing ones New may create. It refuses
// buckets created for another number of shards (keys would be looked for in the wrong bucket, and a duplicate
// taken for a first event), and a missing shard beside siblings that hold claims (ErrWindowLost: an empty bucket in
// its place would admit every retry of their events again).
func survey(ctx context.Context, js jetstream.JetStream, cfg Config) ([]bool, error) {
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
	single, err := exists(cfg.Bucket)
	if err != nil {
		return nil, err
	}
	if k == 1 {
		if single != nil {
			return []bool{false}, nil // today's window: no need to look further (nor the permission to)
		}
		// No single bucket (yet): a sharded window under the same name would be taken for an empty one. The probe
		// is best effort: a user allowed only the single bucket's API subjects gets no answer, which is fine.
		if first, err := exists(ShardBucket(cfg.Bucket, 2, 0)); err == nil && first != nil {
			n, _, _ := shardRecord(first)
			return nil, fmt.Errorf("kvwindow: the window %q is sharded (bucket %s-00 exists, created for %d shards) but shards is 1: "+
				"set DEDUPE_WINDOW_SHARDS to the number of buckets it was created with", cfg.Bucket, cfg.Bucket, n)
		}
		return []bool{cfg.Provision}, nil
	}
	if single != nil {
		return nil, fmt.Errorf("kvwindow: the window %q is a single bucket but shards is %d: its claims would not be found in "+
			"the shards; keep DEDUPE_WINDOW_SHARDS=1, or move to shards as OPERATIONS.md describes", cfg.Bucket, k)
	}
	infos := make([]*jetstream.StreamInfo, k)
	for i := range k {
		if infos[i], err = exists(ShardBucket(cfg.Bucket, k, i)); err != nil {
			return nil, err
		}
	}
	present, used, gap := 0, false, false
	for i, info := range infos {
		bucket := ShardBucket(cfg.Bucket, k, i)
		if info == nil {
			continue
		}
		present++
		gap = gap || present <= i // a bucket after a missing one: creation (in shard order) did not stop here
		used = used || info.State.LastSeq > 0
		n, idx, ok := shardRecord(info)
		switch {
		case !ok || idx < 0:
			return nil, fmt.Errorf("kvwindow: bucket %s records no shard count and index (neither %s and %s metadata nor a description %q): "+
				"it is not a shard of the window %q as dedupeworker creates it; move it away or set DEDUPE_WINDOW_BUCKET to "+
				"another name", bucket, metaShards, metaShard, shardDescription(i, k), cfg.Bucket)
		case n != k:
			return nil, fmt.Errorf("kvwindow: the window %q was created with %d shards, not %d (bucket %s records %d): keys are "+
				"spread by their number, so it cannot change in place; set DEDUPE_WINDOW_SHARDS=%d, or move as OPERATIONS.md "+
				"describes", cfg.Bucket, n, k, bucket, n, n)
		case idx != i:
			return nil, fmt.Errorf("kvwindow: bucket %s records that it is shard %d, not %d: it was renamed or copied from "+
				"another bucket, and its keys are not the ones this name holds", bucket, idx, i)
		}
	}
	beyond, err := exists(ShardBucket(cfg.Bucket, k+1, k))
	if err != nil {
		return nil, err
	}
	if beyond != nil {
		n, _, _ := shardRecord(beyond)
		return nil, fmt.Errorf("kvwindow: the window %q has a bucket %s beyond the %d shards configured: it was created with "+
			"more shards (%d)", cfg.Bucket, ShardBucket(cfg.Bucket, k+1, k), k, n)
	}
	mayCreate := make([]bool, k)
	switch {
	case present == k:
	case present == 0 || (!gap && !used):
		// Nothing yet, or the first buckets of a window that has never held a claim: another worker is creating
		// the buckets (in shard order) right now, or a start stopped half-way. No claim can have been lost.
		for i := range mayCreate {
			mayCreate[i] = cfg.Provision && infos[i] == nil
		}
	default:
		return nil, lostShards(cfg, present, infos)
	}
	return mayCreate, nil
}

// missingShards is the error for shard buckets missing beside siblings that exist (it wraps ErrWindowLost).
type missingShards struct {
	shards map[int]bool // the missing shards
	err    error
}

func (e *missingShards) Error() string { return e.err.Error() }
func (e *missingShards) Unwrap() error { return e.err }

func lostShards(cfg Config, present int, infos []*jetstream.StreamInfo) error {
	var missing, create []string
	shards := map[int]bool{}
	for i, info := range infos {
		if info == nil {
			shards[i] = true
			missing = append(missing, ShardBucket(cfg.Bucket, cfg.Shards, i))
			c := fmt.Sprintf("%s --replicas=%d --description %q", kvAdd(ShardBucket(cfg.Bucket, cfg.Shards, i), cfg.MarkerTTL),
				cfg.Replicas, shardDescription(i, cfg.Shards))
			if cfg.Storage == jetstream.MemoryStorage {
				c += " --storage=memory"
			}
			create = append(create, c)
		}
	}
	return &missingShards{shards: shards, err: fmt.Errorf("%w: the window %q is missing %s while %d of its %d shard buckets exist, so their claims are "+
		"gone; the worker waits and does not create them empty (to accept the loss: %s; what to do: OPERATIONS.md#the-window-bucket-was-lost-or-re-created)",
		ErrWindowLost, cfg.Bucket, strings.Join(missing, ", "), present, cfg.Shards, strings.Join(create, "; "))}
}

// shardRecord reads what a shard bucket records about the window, from its metadata or else its description: the
// number of shards (ok false when neither records it) and its own index (-1 when it records none).
func shardRecord(info *jetstream.StreamInfo) (k, index int, ok bool) {
	index = -1
	var dk, di int
	if _, err := fmt.Sscanf(info.Config.Description, "dedupeworker claim window, shard %d of %d", &di, &dk); err == nil && dk > 0 {
		k, index, ok = dk, di-1, true
	}
	if n, err := strconv.Atoi(info.Config.Metadata[metaShards]); err == nil {
		k, ok = n, true
	}
	if i, err := strconv.Atoi(info.Config.Metadata[metaShard]); err == nil {
		index = i
	}
	return k, index, ok
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

// Forget removes the claim on (tenant, source, key) by purging the key's subject, so that the next copy of the
// event is admitted. It returns 1 if there was a live claim, else 0.
func (m *Manager) Forget(ctx context.Context, tenant, source, key string) (int, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return 0, err
	}
	return m.w.shardOf(k).forget(ctx, k)
}

// ForgetAll removes every claim of tenant and source (source "" = the whole tenant) with one subject-filtered
// purge per bucket; it never lists a bucket. It returns the number of keys purged: live claims, plus keys whose
// claim expired less than the marker TTL ago (their marker is purged too).
func (m *Manager) ForgetAll(ctx context.Context, tenant, source string) (int, error) {
	w := m.w
	if err := validateScope(tenant, source, true); err != nil {
		return 0, err
	}
	total := 0
	var lost []error // of buckets lost: the others are purged all the same
	for _, s := range w.shards {
		n, err := s.forgetAll(ctx, tenant, source)
		total += n
		if errors.Is(err, ErrWindowLost) {
			lost = append(lost, err)
			continue
		}
		if err != nil {
			return total, errors.Join(append(lost, err)...)
		}
	}
	return total, errors.Join(lost...)
}

// List returns up to limit live claims of tenant (and of source; "" = every source), bucket by bucket and in
// revision order within a bucket, starting at from (0: the first); next is the next page's from (0: none). It reads
// with a short-lived consumer filtered on the scope, so its cost is the scope's claims (and markers), never whole
// buckets; a claim taken over or released meanwhile may be missed or listed at its new revision. Errors wrap
// ErrUnavailable or ErrInvalid. A lost bucket is passed over, and the error (ErrWindowLost) names it.
func (m *Manager) List(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
	w := m.w
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
	var lost []error
	for i := first; i < len(w.shards); i++ {
		if err := w.shards[i].gone(); err != nil {
			lost, rev = append(lost, err), 0
			continue
		}
		es, nx, err := w.shards[i].list(ctx, tenant, source, rev, limit-len(entries))
		if err != nil {
			return nil, 0, err
		}
		rev = 0
		entries = append(entries, es...)
		if nx != 0 {
			return entries, uint64(i)<<shardBits | nx, errors.Join(lost...)
		}
		if len(entries) == limit {
			// The page is full: the next one starts at the next bucket (if it holds any of the scope's claims).
			if i+1 < len(w.shards) {
				return entries, uint64(i+1) << shardBits, errors.Join(lost...)
			}
			return entries, 0, errors.Join(lost...)
		}
	}
	return entries, 0, errors.Join(lost...)
}

// Ping checks that every bucket answers and is still the bucket New bound to (one stream info request each, all at
// once, each bounded by Config.Timeout): a bucket deleted or created again fails with ErrWindowLost, and so does
// every later claim in it; one whose age limit is shorter than the longest claim TTL it must hold, ErrAgeLimit.
// Every bucket is checked, so that each is flagged whatever the others answer; pingVerdict picks the error.
func (w *Window) Ping(ctx context.Context) error {
	_, err := w.PingEach(ctx)
	return err
}
