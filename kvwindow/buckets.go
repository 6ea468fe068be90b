package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket metadata keys recording, on every shard bucket, how many shards the window was created with and which
// one the bucket is.
const (
	metaShards = "dedupeworker.shards"
	metaShard  = "dedupeworker.shard"
)

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
			create = append(create, fmt.Sprintf("%s --description %q", kvAdd(ShardBucket(cfg.Bucket, cfg.Shards, i), cfg),
				shardDescription(i, cfg.Shards)))
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
