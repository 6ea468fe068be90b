package kvwindow_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/kvwindow/windowtest"
)

func shardedConfig(k int) kvwindow.Config {
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = k
	return cfg
}

// TestConformanceSharded runs the conformance suite against a window of four buckets.
func TestConformanceSharded(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w := newWindow(t, js, shardedConfig(4))
	windowtest.Run(t, func(t *testing.T) windowtest.Claimer { return w })
}

func TestShardsSpreadKeys(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w := newWindow(t, js, shardedConfig(4))
	if got := w.Buckets(); strings.Join(got, ",") != "dedupe-window-00,dedupe-window-01,dedupe-window-02,dedupe-window-03" {
		t.Fatalf("buckets %v", got)
	}
	const n = 400
	for i := range n {
		claim(t, w, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: fmt.Sprint("k-", i), TTL: time.Hour, Claimant: envelope(uint64(i + 1)), Delivery: delivery(1)})
	}
	total := 0
	for _, b := range w.Buckets() {
		st, err := js.Stream(ctxT(t, 5*time.Second), "KV_"+b)
		if err != nil {
			t.Fatal(err)
		}
		msgs := int(st.CachedInfo().State.Msgs)
		if msgs < n/8 || msgs > n/2 {
			t.Errorf("bucket %s holds %d of %d keys: not spread", b, msgs, n)
		}
		if got := st.CachedInfo().Config.Metadata["dedupeworker.shards"]; got != "4" {
			t.Errorf("bucket %s records shards %q, want 4", b, got)
		}
		total += msgs
	}
	if total != n {
		t.Errorf("%d claims over the buckets, want %d (each key in exactly one)", total, n)
	}
	// Each key is in the bucket BucketOf names, and Get finds it there.
	for i := range 20 {
		key := fmt.Sprint("k-", i)
		b, err := w.BucketOf("acme", "gh", key)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(ctxT(t, 5*time.Second), b)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := kvwindow.KVKey("acme", "gh", key)
		if _, err := kv.Get(ctxT(t, 5*time.Second), k); err != nil {
			t.Errorf("key %s not in bucket %s: %v", key, b, err)
		}
	}
	// A scoped list crosses the buckets, page by page.
	seen := map[string]bool{}
	from := uint64(0)
	for page := 0; page < 100; page++ {
		es, next, err := kvwindow.ManagerOf(w).List(ctxT(t, 10*time.Second), "acme", "gh", from, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if seen[e.Key] {
				t.Fatalf("key %q listed twice", e.Key)
			}
			seen[e.Key] = true
		}
		if next == 0 {
			break
		}
		from = next
	}
	if len(seen) != n {
		t.Errorf("listed %d keys, want %d", len(seen), n)
	}
	// A scoped forget purges every bucket.
	if got, err := kvwindow.ManagerOf(w).ForgetAll(ctxT(t, 10*time.Second), "acme", ""); err != nil || got != n {
		t.Errorf("ForgetAll = %d, %v; want %d", got, err, n)
	}
	if out := claim(t, w, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-1", TTL: time.Hour, Claimant: envelope(9999), Delivery: delivery(1)}); out.Status != kvwindow.Won {
		t.Errorf("claim after ForgetAll: %v", out.Status)
	}
}

// TestShardCountMismatch: the buckets found fix the number of shards; another number is refused with a reason.
func TestShardCountMismatch(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	newWindow(t, js, kvwindow.DefaultConfig()) // the single bucket
	if _, err := kvwindow.New(ctxT(t, 10*time.Second), js, shardedConfig(4)); err == nil || !strings.Contains(err.Error(), "is a single bucket but shards is 4") {
		t.Errorf("4 shards over a single bucket: %v", err)
	}
	other := kvwindow.DefaultConfig()
	other.Bucket = "sharded"
	other.Shards = 4
	newWindow(t, js, other)
	for _, c := range []struct {
		k    int
		want string
	}{
		{1, "is sharded (bucket sharded-00 exists, created for 4 shards) but shards is 1"},
		{2, "was created with 4 shards, not 2"},
		{8, "was created with 4 shards, not 8"},
	} {
		cfg := other
		cfg.Shards = c.k
		if _, err := kvwindow.New(ctxT(t, 10*time.Second), js, cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d shards over 4: %v, want %q", c.k, err, c.want)
		}
	}
	if _, err := kvwindow.New(ctxT(t, 10*time.Second), js, other); err != nil {
		t.Errorf("the same 4 shards again: %v", err)
	}
}

// TestShardsOneWinnerAcrossWorkers: several windows (workers) claim the same keys concurrently; each key has
// exactly one winner.
func TestShardsOneWinnerAcrossWorkers(t *testing.T) {
	s := natstest.Run(t)
	var ws []*kvwindow.Window
	for range 4 {
		ws = append(ws, newWindow(t, jsFor(t, s.URL()), shardedConfig(4)))
	}
	const keys = 50
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for k := range keys {
				key := fmt.Sprint("race-", k)
				out, err := w.Claim(ctxT(t, 10*time.Second), kvwindow.Claim{Tenant: "acme", Source: "gh", Key: key, TTL: time.Hour,
					Claimant: envelope(uint64(1000*(i+1) + k)), Delivery: delivery(1)}, kvwindow.Known{})
				if err != nil {
					t.Error(err)
					return
				}
				if out.Status == kvwindow.Won {
					mu.Lock()
					won[key]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if n := won[fmt.Sprint("race-", k)]; n != 1 {
			t.Errorf("key race-%d won %d times", k, n)
		}
	}
}
