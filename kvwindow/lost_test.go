package kvwindow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/nats-io/nats.go/jetstream"
)

// fill claims n keys of acme/gh (seq 1..n) and returns them by bucket.
func fill(t *testing.T, w *kvwindow.Window, n int) map[string][]string {
	t.Helper()
	byBucket := map[string][]string{}
	for i := range n {
		key := fmt.Sprint("k-", i)
		if out := claim(t, w, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: key, TTL: time.Hour, Claimant: envelope(uint64(i + 1)),
			Delivery: delivery(1)}); out.Status != kvwindow.Won {
			t.Fatalf("claim %s: %+v", key, out)
		}
		b, err := w.BucketOf("acme", "gh", key)
		if err != nil {
			t.Fatal(err)
		}
		byBucket[b] = append(byBucket[b], key)
	}
	return byBucket
}

// retried claims every key again as another envelope (a provider's retry) and counts the Won answers: each one
// would be published a second time.
func retried(t *testing.T, w *kvwindow.Window, keys []string) (won int, errs []error) {
	t.Helper()
	for i, key := range keys {
		out, err := w.Claim(ctxT(t, 10*time.Second), kvwindow.Claim{Tenant: "acme", Source: "gh", Key: key, TTL: time.Hour,
			Claimant: envelope(uint64(100_000 + i)), Delivery: delivery(1)}, kvwindow.Known{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if out.Status == kvwindow.Won {
			won++
		}
	}
	return won, errs
}

func bucketExists(t *testing.T, js jetstream.JetStream, bucket string) bool {
	t.Helper()
	_, err := js.Stream(ctxT(t, 5*time.Second), "KV_"+bucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestLostShardNotRecreated: a replica starting while one shard bucket is missing beside populated siblings
// never creates it empty; it fails with ErrWindowLost naming the bucket and how to recover. Before the fix New
// re-created the bucket empty, and every retry of its keys was Won again (published a second time): 58 of 58 for
// -02, 47 of 47 for -03, 53 of 53 for -00.
func TestLostShardNotRecreated(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w := newWindow(t, js, shardedConfig(4))
	byBucket := fill(t, w, 200)
	for _, lost := range []string{"dedupe-window-02", "dedupe-window-03", "dedupe-window-00"} {
		t.Run(lost, func(t *testing.T) {
			if err := js.DeleteKeyValue(ctxT(t, 10*time.Second), lost); err != nil {
				t.Fatal(err)
			}
			_, err := kvwindow.New(ctxT(t, 20*time.Second), js, shardedConfig(4))
			if err == nil {
				w2, _ := kvwindow.New(ctxT(t, 20*time.Second), js, shardedConfig(4))
				won, _ := retried(t, w2, byBucket[lost])
				t.Fatalf("New re-created %s empty beside its siblings: %d of %d retries of its keys were Won again", lost, won, len(byBucket[lost]))
			}
			if !errors.Is(err, kvwindow.ErrWindowLost) || !errors.Is(err, kvwindow.ErrUnavailable) ||
				!strings.Contains(err.Error(), "missing "+lost+" while 3 of its 4 shard buckets exist") ||
				!strings.Contains(err.Error(), "nats kv add "+lost+" --history=1 --marker-ttl=1m0s") {
				t.Fatalf("New with %s missing: %v, want ErrWindowLost naming the bucket and the recovery", lost, err)
			}
			if bucketExists(t, js, lost) {
				t.Fatalf("%s was created", lost)
			}
			// The operator accepts the loss and creates the bucket as the error says (nats kv add cannot set
			// metadata: the description records the shard).
			i := int(lost[len(lost)-1] - '0')
			if _, err := js.CreateKeyValue(ctxT(t, 10*time.Second), jetstream.KeyValueConfig{Bucket: lost, History: 1,
				LimitMarkerTTL: time.Minute, Description: fmt.Sprintf("dedupeworker claim window, shard %d of 4", i+1)}); err != nil {
				t.Fatal(err)
			}
			w2 := newWindow(t, js, shardedConfig(4))
			if won, errs := retried(t, w2, byBucket["dedupe-window-01"]); won != 0 || len(errs) != 0 {
				t.Fatalf("retries in a sibling kept: %d Won, errors %v", won, errs)
			}
		})
	}
}

// TestHalfProvisionedShards: the first buckets of a window that never held a claim (another worker is creating
// them, or a start stopped half-way) are completed, not taken for lost ones.
func TestHalfProvisionedShards(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	for i := range 2 {
		b := kvwindow.ShardBucket(kvwindow.DefaultBucket, 4, i)
		if _, err := js.CreateKeyValue(ctxT(t, 10*time.Second), jetstream.KeyValueConfig{Bucket: b, History: 1, LimitMarkerTTL: time.Minute,
			Metadata: map[string]string{"dedupeworker.shards": "4", "dedupeworker.shard": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w := newWindow(t, js, shardedConfig(4))
	for i, b := range w.Buckets() {
		st, err := js.Stream(ctxT(t, 5*time.Second), "KV_"+b)
		if err != nil {
			t.Fatal(err)
		}
		md := st.CachedInfo().Config.Metadata
		if md["dedupeworker.shards"] != "4" || md["dedupeworker.shard"] != fmt.Sprint(i) {
			t.Errorf("bucket %s metadata %v, want shards 4 and shard %d", b, md, i)
		}
	}
}

// TestShardCountCheckedOnEveryBucket: every shard bucket records the count and its index, and New checks both on
// every bucket. Before the fix, with -00 lost a replica with K=8 was accepted over K=4 buckets: it created -00 and
// -04…-07, and 64 of 100 keys claimed in the K=4 window were Won again in the K=8 one (two winners).
func TestShardCountCheckedOnEveryBucket(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	w4 := newWindow(t, js, shardedConfig(4))
	byBucket := fill(t, w4, 100)
	if err := js.DeleteKeyValue(ctxT(t, 10*time.Second), "dedupe-window-00"); err != nil {
		t.Fatal(err)
	}
	if w8, err := kvwindow.New(ctxT(t, 20*time.Second), js, shardedConfig(8)); err == nil {
		var keys []string
		for _, ks := range byBucket {
			keys = append(keys, ks...)
		}
		won, _ := retried(t, w8, keys)
		t.Fatalf("K=8 accepted over K=4 buckets with -00 lost: %d of %d keys claimed in the K=4 window were Won again", won, len(keys))
	} else if !strings.Contains(err.Error(), "was created with 4 shards, not 8 (bucket dedupe-window-01 records 4)") {
		t.Fatalf("K=8 over K=4 buckets with -00 lost: %v, want the recorded count named", err)
	}
	if _, err := kvwindow.New(ctxT(t, 20*time.Second), js, shardedConfig(4)); !errors.Is(err, kvwindow.ErrWindowLost) ||
		!strings.Contains(err.Error(), "missing dedupe-window-00") {
		t.Fatalf("K=4 with -00 lost: %v, want ErrWindowLost naming dedupe-window-00", err)
	}
	for _, b := range []string{"dedupe-window-00", "dedupe-window-04"} {
		if bucketExists(t, js, b) {
			t.Errorf("%s was created", b)
		}
	}

	// What a bucket records, bucket by bucket.
	for _, tc := range []struct {
		name string
		cfg  jetstream.KeyValueConfig
		want string // "" = accepted
	}{
		{"index recorded", jetstream.KeyValueConfig{Metadata: map[string]string{"dedupeworker.shards": "2", "dedupeworker.shard": "1"}}, ""},
		{"count only without index", jetstream.KeyValueConfig{Metadata: map[string]string{"dedupeworker.shards": "2"}}, "records no shard count and index"},
		{"description only (nats kv add)", jetstream.KeyValueConfig{Description: "dedupeworker claim window, shard 2 of 2"}, ""},
		{"another index", jetstream.KeyValueConfig{Metadata: map[string]string{"dedupeworker.shards": "2", "dedupeworker.shard": "0"}},
			"records that it is shard 0, not 1"},
		{"another index in the description", jetstream.KeyValueConfig{Description: "dedupeworker claim window, shard 1 of 2"},
			"records that it is shard 0, not 1"},
		{"another count", jetstream.KeyValueConfig{Metadata: map[string]string{"dedupeworker.shards": "3", "dedupeworker.shard": "1"}},
			"was created with 3 shards, not 2"},
		{"nothing recorded", jetstream.KeyValueConfig{Description: "my bucket"}, "records no shard count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.NewReplacer(" ", "", "(", "", ")", "").Replace(tc.name)
			cfg := shardedConfig(2)
			cfg.Bucket = name
			first := cfg
			first.Shards = 1
			first.Bucket = kvwindow.ShardBucket(name, 2, 0)
			kv := tc.cfg
			kv.Bucket, kv.History, kv.LimitMarkerTTL = kvwindow.ShardBucket(name, 2, 1), 1, time.Minute
			if _, err := js.CreateKeyValue(ctxT(t, 10*time.Second), jetstream.KeyValueConfig{Bucket: first.Bucket, History: 1,
				LimitMarkerTTL: time.Minute, Metadata: map[string]string{"dedupeworker.shards": "2", "dedupeworker.shard": "0"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateKeyValue(ctxT(t, 10*time.Second), kv); err != nil {
				t.Fatal(err)
			}
			_, err := kvwindow.New(ctxT(t, 20*time.Second), js, cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBucketLostUnderRunningWorker: a running worker notices that its bucket was deleted, or deleted and created
// again (by a replica that restarted meanwhile), and from then on refuses claims in it with ErrWindowLost. Before
// the fix Ping reported the deleted bucket as plain unavailability ("stream not found", as for a server restart),
// and once a replica had re-created it Ping passed again and the worker claimed into the empty bucket.
func TestBucketLostUnderRunningWorker(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	seed := newWindow(t, js, kvwindow.DefaultConfig())
	fill(t, seed, 20)
	running := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig()) // bound over the 20 claims

	// Deleted: Ping and every claim say so.
	if err := js.DeleteKeyValue(ctx, "dedupe-window"); err != nil {
		t.Fatal(err)
	}
	err := running.Ping(ctx)
	if !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), `bucket "dedupe-window" was deleted under the running worker`) {
		t.Fatalf("Ping after the delete: %v, want ErrWindowLost", err)
	}
	if _, err := running.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-1", TTL: time.Hour, Claimant: envelope(7), Delivery: delivery(1)}, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("claim in a deleted bucket: %v, want ErrWindowLost", err)
	}

	// A replica restarts and provisions it empty: the running worker still refuses, for good.
	newWindow(t, js, kvwindow.DefaultConfig())
	err = running.Ping(ctx)
	if !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), "was deleted and created again under the running worker") {
		t.Fatalf("Ping after the re-creation: %v, want ErrWindowLost", err)
	}
	if won, errs := retried(t, running, []string{"k-1", "k-5", "k-19"}); won != 0 || len(errs) != 3 || !errors.Is(errs[0], kvwindow.ErrWindowLost) {
		t.Fatalf("retries in the re-created bucket: %d Won, errors %v, want ErrWindowLost for each", won, errs)
	}
	if _, _, err := running.MarkPublished(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-1", TTL: time.Hour, Claimant: envelope(2)}, 1, time.Time{}); !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("MarkPublished in a lost bucket: %v", err)
	}
	if _, err := running.Release(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-1", TTL: time.Hour, Claimant: envelope(2)}, 1, false); !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("Release in a lost bucket: %v", err)
	}
}

// TestBucketRecreatedCaughtByFirstWrite: between two pings, the first write of a running worker into a re-created
// bucket is caught by where it was stored (at or below the highest sequence the worker had seen, here the bucket's
// last at bind). Before the fix the retry of k-3 was Won (revision 1 of the new bucket).
func TestBucketRecreatedCaughtByFirstWrite(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	fill(t, newWindow(t, js, kvwindow.DefaultConfig()), 20)
	running := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	if err := js.DeleteKeyValue(ctx, "dedupe-window"); err != nil {
		t.Fatal(err)
	}
	newWindow(t, js, kvwindow.DefaultConfig()) // a restarted replica provisions it empty
	out, err := running.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-3", TTL: time.Hour, Claimant: envelope(50), Delivery: delivery(1)}, kvwindow.Known{})
	if !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), "was created again under the running worker") {
		t.Fatalf("a retry of k-3 (claimed before the loss) in the re-created bucket: %+v %v, want ErrWindowLost", out, err)
	}
	if err := running.Ping(ctx); !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("Ping after the caught write: %v", err)
	}
}

// TestLostShardUnderRunningWorker: with shards, only the lost bucket refuses claims; the others keep deciding.
// Before the fix Ping returned nil over the re-created -02.
func TestLostShardUnderRunningWorker(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	running := newWindow(t, js, shardedConfig(4))
	byBucket := fill(t, running, 100)
	if err := js.DeleteKeyValue(ctx, "dedupe-window-02"); err != nil {
		t.Fatal(err)
	}
	// The bucket re-created by hand, as a careless operator might: the running worker still refuses it.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "dedupe-window-02", History: 1, LimitMarkerTTL: time.Minute,
		Metadata: map[string]string{"dedupeworker.shards": "4", "dedupeworker.shard": "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := running.Ping(ctx); !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), `"dedupe-window-02"`) {
		t.Fatalf("Ping: %v, want ErrWindowLost for dedupe-window-02", err)
	}
	if won, errs := retried(t, running, byBucket["dedupe-window-02"]); won != 0 || len(errs) != len(byBucket["dedupe-window-02"]) {
		t.Fatalf("retries in the lost shard: %d Won, %d errors of %d", won, len(errs), len(byBucket["dedupe-window-02"]))
	}
	for _, b := range []string{"dedupe-window-00", "dedupe-window-01", "dedupe-window-03"} {
		if won, errs := retried(t, running, byBucket[b]); won != 0 || len(errs) != 0 {
			t.Fatalf("retries in %s: %d Won, errors %v, want Duplicate for each", b, won, errs)
		}
	}
}

// TestClaimBacksOff: a claim whose write lost and whose read then found the key empty (the claim it lost to
// expired meanwhile) waits before writing again, 1 ms, 2 ms, … per attempt. Issue 15 item 7 said pause()
// returned without waiting; it waited already (a timer and a select on it): this proves it through the window's
// counts and the claim's duration.
func TestClaimBacksOff(t *testing.T) {
	s := natstest.Run(t)
	w := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig())
	c := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "busy", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(1)}
	claim(t, w, c)
	const emptyReads = 3
	reads := 0
	kvwindow.SetReadHook(w, func(string) bool { reads++; return reads <= emptyReads })
	t.Cleanup(func() { kvwindow.SetReadHook(w, nil) })
	c.Claimant = envelope(2)
	start := time.Now()
	out := claim(t, w, c)
	elapsed := time.Since(start)
	n, slept := kvwindow.Backoffs(w)
	// Attempts 1, 2 and 3 wait 1, 2 and 3 ms: a timer never fires early, so these are lower bounds.
	if out.Status != kvwindow.Duplicate || n != emptyReads || slept < 6*time.Millisecond || elapsed < 6*time.Millisecond {
		t.Fatalf("claim after %d empty reads: %+v, %d backoffs sleeping %s in %s; want Duplicate after 3 backoffs of at least 6ms in all",
			emptyReads, out, n, slept, elapsed)
	}
}

// TestBucketEditedOrRestartedIsNotLost: what changes a bucket without losing its claims — an edit of its stream
// (a cap, as OPERATIONS.md suggests), a restart of the server — keeps its creation time: the running worker goes on.
func TestBucketEditedOrRestartedIsNotLost(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	w := newWindow(t, js, shardedConfig(2))
	fill(t, w, 20)
	editStream(t, js, "KV_dedupe-window-01", func(sc *jetstream.StreamConfig) { sc.MaxBytes = 64 << 20 })
	if err := w.Ping(ctx); err != nil {
		t.Fatalf("Ping after an edit of the bucket: %v", err)
	}
	s.Restart()
	natstest.Eventually(t, 20*time.Second, func() error { return w.Ping(ctx) })
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprint("k-", i))
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		if won, errs := retried(t, w, keys); won != 0 || len(errs) != 0 {
			return fmt.Errorf("after the restart: %d Won, errors %v", won, errs)
		}
		return nil
	})
}
