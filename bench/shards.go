package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// maxShards is the largest DEDUPE_WINDOW_SHARDS the worker accepts.
const maxShards = kvwindow.MaxShards

// shardCount is -shards: the number of buckets the claim window is spread over. The zero value means 1.
type shardCount int

// k is the number of shards (at least 1).
func (s shardCount) k() int { return max(1, int(s)) }

func (s *shardCount) String() string {
	if s == nil {
		return "1"
	}
	return strconv.Itoa(s.k())
}

// Set implements flag.Value.
func (s *shardCount) Set(v string) error {
	n, err := parseCount(v, maxShards)
	if err != nil {
		return err
	}
	*s = shardCount(n)
	return nil
}

// parseCount reads a whole number between 1 and hi (surrounding blanks ignored).
func parseCount(v string, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > hi {
		return 0, fmt.Errorf("%q: want a whole number from 1 to %d", v, hi)
	}
	return n, nil
}

// shardsUsage is the help of -shards.
var shardsUsage = fmt.Sprintf("spread the claim window over `K` buckets (1-%d; default 1): the workers run with DEDUPE_WINDOW_SHARDS=K, "+
	"floor and naive create the K buckets the worker would (%s-00 … with K > 1, recording K in their metadata) and "+
	"route each key to its bucket as the worker does; the heap per window key counts the keys of all K buckets", maxShards, bucket)

// windowBucket is the name of bucket i of a window of k shards, as the worker names it: the single bucket
// dedupe-window when k is 1, else dedupe-window-NN.
func windowBucket(k, i int) string { return kvwindow.ShardBucket(bucket, k, i) }

// shardIndex is the shard that holds a KV key (<tenant>.<source>.<enc>) in a window of k shards: FNV-1a (64 bits)
// of the key modulo k, the worker's routing (kvwindow's shardOf).
func shardIndex(kvKey string, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(kvKey))
	return int(h.Sum64() % uint64(k))
}

// windowBucketOf is the bucket of a KV key in a window of k shards.
func windowBucketOf(kvKey string, k int) string { return windowBucket(k, shardIndex(kvKey, k)) }

// createWindowBuckets creates the k buckets of the claim window for the in-process contenders, with the worker's
// own kvwindow.New and defaults: the buckets are exactly those a worker with DEDUPE_WINDOW_SHARDS=k creates.
func createWindowBuckets(ctx context.Context, js jetstream.JetStream, k int) error {
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = max(k, 1)
	if _, err := kvwindow.New(ctx, js, cfg); err != nil {
		return fmt.Errorf("create the window's %d bucket(s) %s…: %w", cfg.Shards, windowBucket(cfg.Shards, 0), err)
	}
	return nil
}

// countWindowKeys returns the messages (keys) in each of the k window buckets. It fails when the buckets on the
// server are not those of a k-shard window: a missing shard, the single bucket next to shards, or a shard beyond
// k — for a worker, a binary that ignores DEDUPE_WINDOW_SHARDS or a wrong setting, which would make the heap per
// key count the wrong buckets.
func countWindowKeys(ctx context.Context, js jetstream.JetStream, k int) ([]int, error) {
	k = max(k, 1)
	exists := func(b string) (bool, error) {
		_, err := js.Stream(ctx, "KV_"+b)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	per := make([]int, k)
	for i := range k {
		b := windowBucket(k, i)
		n, ok := streamMsgs(ctx, js, "KV_"+b)
		if !ok {
			return nil, fmt.Errorf("window bucket %s (shard %d of %d) not found: does the worker support DEDUPE_WINDOW_SHARDS?", b, i+1, k)
		}
		per[i] = n
	}
	stray := windowBucket(2, 0) // dedupe-window-00: a sharded window, when k is 1
	if k > 1 {
		stray = bucket // the single bucket next to the shards
	}
	for _, b := range []string{stray, windowBucket(k+1, k)} {
		found, err := exists(b)
		if err != nil {
			return nil, fmt.Errorf("window bucket %s: %w", b, err)
		}
		if found {
			return nil, fmt.Errorf("window bucket %s exists next to the %d bucket(s) of a %d-shard window", b, k, k)
		}
	}
	return per, nil
}

// windowKeys is the number of keys the server remembers in the window of the run of kind (every shard), for the
// heap per key. The first run of each shard count with more than one shard notes how the keys spread.
func (b *bench) windowKeys(ctx context.Context, js jetstream.JetStream, kind string) (int, error) {
	k := b.variant(kind).shards
	per, err := countWindowKeys(ctx, js, k)
	if err != nil {
		return 0, err
	}
	total := 0
	parts := make([]string, len(per))
	for i, n := range per {
		total += n
		parts[i] = strconv.Itoa(n)
	}
	b.notesMu.Lock()
	first := !b.scale.spreadNoted[k]
	if b.scale.spreadNoted == nil {
		b.scale.spreadNoted = map[int]bool{}
	}
	b.scale.spreadNoted[k] = true
	b.notesMu.Unlock()
	if k > 1 && first {
		b.note("%s drain: %d window keys over %d buckets %s…%s: %s", kind, total, k, windowBucket(k, 0), windowBucket(k, k-1), strings.Join(parts, " + "))
	}
	return total, nil
}

// windowLine names the window layout in the report.
func windowLine(k int) string {
	if k <= 1 {
		return fmt.Sprintf("window shards: 1: the single bucket %s", bucket)
	}
	return fmt.Sprintf("window shards: %d: buckets %s … %s (workers: DEDUPE_WINDOW_SHARDS=%d; floor and naive create the same buckets and route keys as the worker does)",
		k, windowBucket(k, 0), windowBucket(k, k-1), k)
}
