package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestShardsFlag(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseOptions(nil, &stderr)
	if err != nil {
		t.Fatalf("no flags: %v\n%s", err, stderr.String())
	}
	if o.shards.k() != 1 {
		t.Fatalf("default -shards: %d, want 1", o.shards.k())
	}
	for arg, want := range map[string]int{"1": 1, "4": 4, " 8 ": 8, "64": 64} {
		stderr.Reset()
		o, err := parseOptions([]string{"-shards=" + arg}, &stderr)
		if err != nil {
			t.Fatalf("-shards %q: %v\n%s", arg, err, stderr.String())
		}
		if o.shards.k() != want || o.shards.String() != strconv.Itoa(want) {
			t.Errorf("-shards %q: %d (%s), want %d", arg, o.shards.k(), o.shards.String(), want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "65", "four", "2,4", "1.5"} {
		stderr.Reset()
		_, err := parseOptions([]string{"-shards=" + bad}, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("-shards %q: err %v, want a usage error", bad, err)
		}
		if !strings.Contains(stderr.String(), "-shards") || !strings.Contains(stderr.String(), "from 1 to 64") {
			t.Errorf("-shards %q: the message should name the flag and the range:\n%s", bad, stderr.String())
		}
	}
	stderr.Reset()
	if _, err := parseOptions([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	if h := stderr.String(); !strings.Contains(h, "-shards K") || !strings.Contains(h, "default 1") {
		t.Errorf("help lacks -shards or its default:\n%s", h)
	}
}

func TestWindowBucketNames(t *testing.T) {
	for _, c := range []struct {
		k    int
		want []string
	}{
		{1, []string{"dedupe-window"}},
		{2, []string{"dedupe-window-00", "dedupe-window-01"}},
		{4, []string{"dedupe-window-00", "dedupe-window-01", "dedupe-window-02", "dedupe-window-03"}},
	} {
		var got []string
		for i := range c.k {
			got = append(got, windowBucket(c.k, i))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%d shards: buckets %v, want %v", c.k, got, c.want)
		}
	}
	if b := windowBucket(12, 11); b != "dedupe-window-11" {
		t.Errorf("shard 11 of 12: %s", b)
	}
	if b := windowBucket(64, 63); b != "dedupe-window-63" {
		t.Errorf("shard 63 of 64: %s", b)
	}
	for _, k := range []int{1, 3, 64} {
		for i := range k {
			if got, want := windowBucket(k, i), kvwindow.ShardBucket(kvwindow.DefaultBucket, k, i); got != want {
				t.Errorf("shard %d of %d: bench %s, worker %s", i, k, got, want)
			}
		}
	}
}

func TestWorkerEnvShards(t *testing.T) {
	for shards, want := range map[int]string{0: "", 1: "", 4: "DEDUPE_WINDOW_SHARDS=4", 64: "DEDUPE_WINDOW_SHARDS=64"} {
		env := workerEnv("nats://127.0.0.1:1", 1, workerSpec{shards: shards})
		var got []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "DEDUPE_WINDOW_SHARDS=") {
				got = append(got, kv)
			}
		}
		if want == "" && len(got) > 0 || want != "" && !slices.Equal(got, []string{want}) {
			t.Errorf("shards %d: %v, want %q", shards, got, want)
		}
	}
}

// TestClientSideWindowIsTheWorkers creates the window the way floor and naive do and checks that the worker's
// kvwindow takes it as its own: it binds without provisioning for the same K, refuses it for another K (the
// count is recorded), and routes every workload key to the bucket the bench routes it to.
func TestClientSideWindowIsTheWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := NewWorkload(WorkloadConfig{N: 2000, Seed: 7}, GeneratedCorpus(7, 8))
	for _, k := range []int{1, 4, 5} {
		// A server of its own for each K: streams deleted and created again at once on one server raced with the
		// server's removal of the deleted ones' directories ("could not create storage directory … no such file
		// or directory", 10077).
		srv := natstest.Run(t)
		nc, js, err := connect(srv.URL(), "shards-test")
		if err != nil {
			t.Fatal(err)
		}
		if err := createInput(ctx, js, 0, retainWorkQueue); err != nil {
			t.Fatal(err)
		}
		if err := createClientSide(ctx, js, 1000, k); err != nil {
			t.Fatalf("%d shards: %v", k, err)
		}
		cfg := kvwindow.DefaultConfig()
		cfg.Provision, cfg.Shards = false, k
		win, err := kvwindow.New(ctx, js, cfg)
		if err != nil {
			t.Fatalf("%d shards: the worker refuses the bench's buckets: %v", k, err)
		}
		if got, want := win.Buckets(), bucketNames(k); !slices.Equal(got, want) {
			t.Errorf("%d shards: worker's buckets %v, bench's %v", k, got, want)
		}
		other := cfg
		other.Shards = k%4 + 2
		if _, err := kvwindow.New(ctx, js, other); err == nil {
			t.Errorf("%d shards: a worker configured for %d shards accepted the buckets", k, other.Shards)
		}
		spread := make([]int, k)
		for i := range w.Envelopes {
			e := &w.Events[w.Envelopes[i].Event]
			if e.Key == "" {
				continue
			}
			kvKey, err := kvwindow.KVKey(e.Tenant, e.Source, e.Key)
			if err != nil {
				t.Fatal(err)
			}
			want, err := win.BucketOf(e.Tenant, e.Source, e.Key)
			if err != nil {
				t.Fatal(err)
			}
			if got := windowBucketOf(kvKey, k); got != want {
				t.Fatalf("%d shards: key %s: bench routes it to %s, the worker to %s", k, kvKey, got, want)
			}
			if len(e.Key) <= 48 && w.KVKey(i) != kvKey {
				t.Errorf("workload KV key %s, worker's %s", w.KVKey(i), kvKey)
			}
			spread[shardIndex(kvKey, k)]++
		}
		if slices.Contains(spread, 0) {
			t.Errorf("%d shards: keys per bucket %v", k, spread)
		}
		nc.Close()
		srv.Shutdown()
	}
}

func bucketNames(k int) []string {
	var out []string
	for i := range k {
		out = append(out, windowBucket(k, i))
	}
	return out
}

// TestCountWindowKeys counts the keys of every shard and refuses a layout other than the K asked for.
func TestCountWindowKeys(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, js, err := connect(srv.URL(), "shards-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := countWindowKeys(ctx, js, 4); err == nil {
		t.Error("no buckets: no error")
	}
	if err := createWindowBuckets(ctx, js, 4); err != nil {
		t.Fatal(err)
	}
	kvs := map[string]jetstream.KeyValue{}
	for _, b := range bucketNames(4) {
		if kvs[b], err = js.KeyValue(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]int, 4)
	for i := range 100 {
		key := fmt.Sprintf("t%d.gh.k%d", i%3, i)
		if _, err := kvs[windowBucketOf(key, 4)].Create(ctx, key, []byte("claimed")); err != nil {
			t.Fatal(err)
		}
		want[shardIndex(key, 4)]++
	}
	got, err := countWindowKeys(ctx, js, 4)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("keys per bucket %v (%v), want %v", got, err, want)
	}
	if slices.Contains(want, 0) {
		t.Errorf("100 keys left a bucket empty: %v", want)
	}
	for _, k := range []int{1, 3, 5} {
		if _, err := countWindowKeys(ctx, js, k); err == nil {
			t.Errorf("a 4-shard window counted as %d shard(s)", k)
		}
	}
	// The worker refuses to create the single bucket beside the shards; a bucket created by hand can be there.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := countWindowKeys(ctx, js, 4); err == nil || !strings.Contains(err.Error(), "dedupe-window exists") {
		t.Errorf("the single bucket next to the shards: %v", err)
	}
}

// TestInProcessContendersSharded drains a small workload with floor and naive over a 4-shard window: every unique
// event comes out once, and the window keys of all buckets are the workload's keys.
func TestInProcessContendersSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("drains a workload")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := NewWorkload(WorkloadConfig{N: 600, Seed: 11}, GeneratedCorpus(11, 8))
	const k = 4
	for name, fn := range map[string]inProcess{cFloor: floorContender(64, k), cNaive: naiveContender(k)} {
		srv := natstest.Run(t) // a server of its own, as in TestClientSideWindowIsTheWorkers
		nc, js, err := connect(srv.URL(), "shards-test")
		if err != nil {
			t.Fatal(err)
		}
		if err := createInput(ctx, js, 0, retainWorkQueue); err != nil {
			t.Fatal(err)
		}
		if err := createClientSide(ctx, js, 1000, k); err != nil {
			t.Fatal(err)
		}
		if _, err := publishAll(ctx, js, w, 0, len(w.Envelopes), nil); err != nil {
			t.Fatal(err)
		}
		cctx, stop := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- fn(cctx, srv.URL(), w) }()
		for {
			c, err := js.Consumer(ctx, inputStream, consumerName)
			if err != nil {
				t.Fatal(err)
			}
			if ci := c.CachedInfo(); ci.NumPending == 0 && ci.NumAckPending == 0 {
				break
			}
			select {
			case err := <-errc:
				t.Fatalf("%s ended early: %v", name, err)
			case <-ctx.Done():
				t.Fatalf("%s: not drained", name)
			case <-time.After(20 * time.Millisecond):
			}
		}
		stop()
		if err := <-errc; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, _ := streamMsgs(ctx, js, outputStream); n != w.Expected() {
			t.Errorf("%s: %d outputs, want %d", name, n, w.Expected())
		}
		per, err := countWindowKeys(ctx, js, k)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range per {
			total += n
		}
		if total != w.KeyedUnique() || slices.Contains(per, 0) {
			t.Errorf("%s: window keys %v (total %d), want %d over every bucket", name, per, total, w.KeyedUnique())
		}
		nc.Close()
		srv.Shutdown()
	}
}
