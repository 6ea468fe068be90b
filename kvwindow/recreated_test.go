package kvwindow_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// recreate deletes the single bucket and lets a restarting replica provision it empty.
func recreate(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	if err := js.DeleteKeyValue(ctxT(t, 10*time.Second), "dedupe-window"); err != nil {
		t.Fatal(err)
	}
	newWindow(t, js, kvwindow.DefaultConfig())
}

// wantRecreated fails unless err says the bucket was created again.
func wantRecreated(t *testing.T, what string, out kvwindow.Outcome, err error) {
	t.Helper()
	if !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), "was created again under the running worker") {
		t.Fatalf("%s: %+v %v, want ErrWindowLost (created again)", what, out, err)
	}
}

// TestRecreatedAck: what an acknowledgement proves, given the highest sequence the worker had seen in the bucket
// before it sent the write.
func TestRecreatedAck(t *testing.T) {
	const kv = "KV_dedupe-window"
	for _, tc := range []struct {
		name      string
		ackStream string
		seq, seen uint64
		want      bool
	}{
		{"first write into an empty bucket", kv, 1, 0, false},
		{"next write of ours", kv, 21, 20, false},
		{"other workers wrote meanwhile", kv, 500, 20, false},
		{"acknowledged after a later write of ours (seen taken before sending)", kv, 22, 21, false},
		{"stored at the sequence already seen", kv, 20, 20, true},
		{"stored below what was seen: a new stream of that name", kv, 1, 20, true},
		{"a new stream that has not passed what was seen", kv, 19, 20, true},
		{"a new stream already past what was seen: not provable here (Ping compares creation times)", kv, 25, 20, false},
		{"stored in another stream", "KV_other", 21, 20, true},
		{"another stream, even above", "KV_other", 1000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kvwindow.RecreatedAck(kv, tc.ackStream, tc.seq, tc.seen); got != tc.want {
				t.Fatalf("stored in %s at %d, seen %d: recreated %v, want %v", tc.ackStream, tc.seq, tc.seen, got, tc.want)
			}
		})
	}
}

// TestRecreatedBucketCaughtAfterOwnClaims: a worker that created the bucket empty (a first deploy) and claimed in
// it; the bucket is deleted and created again; the retry of an event it claimed, before any Ping, is caught by its
// write's acknowledgement (stored below the sequences the worker's own claims had). Before the fix it was Won (the
// check compared with the bucket's sequence at bind, 0), and every such retry was published again until the next
// Ping.
func TestRecreatedBucketCaughtAfterOwnClaims(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	running := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig()) // creates it empty
	fill(t, running, 20)
	recreate(t, js)
	out, err := running.Claim(ctxT(t, 10*time.Second), kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-3", TTL: time.Hour,
		Claimant: envelope(50), Delivery: delivery(1)}, kvwindow.Known{})
	wantRecreated(t, "retry of k-3 in the re-created bucket", out, err)
	if won, errs := retried(t, running, []string{"k-1", "k-19"}); won != 0 || len(errs) != 2 {
		t.Fatalf("later retries: %d Won, errors %v, want ErrWindowLost for each", won, errs)
	}
}

// TestRecreatedBucketCaughtAfterReadsAndPings: a worker that wrote nothing yet still knows how far the bucket got
// from what it read and from its Pings; a write into the bucket created again lands below that. Before the fix
// both claims were Won (the bucket was empty at bind).
func TestRecreatedBucketCaughtAfterReadsAndPings(t *testing.T) {
	for _, tc := range []struct {
		name string
		look func(t *testing.T, w *kvwindow.Window) error
	}{
		{"read", func(t *testing.T, w *kvwindow.Window) error {
			_, ok, err := w.Get(ctxT(t, 10*time.Second), "acme", "gh", "k-19")
			if err == nil && !ok {
				err = errors.New("k-19 not found")
			}
			return err
		}},
		{"ping", func(t *testing.T, w *kvwindow.Window) error { return w.Ping(ctxT(t, 10*time.Second)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.Run(t)
			js := jsFor(t, s.URL())
			idle := newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig()) // creates it empty
			fill(t, newWindow(t, js, kvwindow.DefaultConfig()), 20)           // another worker claims
			if err := tc.look(t, idle); err != nil {
				t.Fatal(err)
			}
			recreate(t, js)
			out, err := idle.Claim(ctxT(t, 10*time.Second), kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k-3", TTL: time.Hour,
				Claimant: envelope(50), Delivery: delivery(1)}, kvwindow.Known{})
			wantRecreated(t, "retry of k-3 in the re-created bucket", out, err)
		})
	}
}

// TestRecreatedShardCaughtAfterOwnClaims: with shards, each bucket keeps its own account of the sequences seen: the
// shard created again by hand refuses the first retry, before any Ping, and the others go on. Before the fix every
// retry in dedupe-window-02 was Won.
func TestRecreatedShardCaughtAfterOwnClaims(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	running := newWindow(t, jsFor(t, s.URL()), shardedConfig(4)) // creates all four empty
	byBucket := fill(t, running, 100)
	if err := js.DeleteKeyValue(ctx, "dedupe-window-02"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "dedupe-window-02", History: 1, LimitMarkerTTL: time.Minute,
		Metadata: map[string]string{"dedupeworker.shards": "4", "dedupeworker.shard": "2"}}); err != nil {
		t.Fatal(err)
	}
	lost := byBucket["dedupe-window-02"]
	if won, errs := retried(t, running, lost); won != 0 || len(errs) != len(lost) || !errors.Is(errs[0], kvwindow.ErrWindowLost) {
		t.Fatalf("retries in the re-created shard: %d Won, errors %v, want ErrWindowLost for each of %d", won, errs, len(lost))
	}
	for _, b := range []string{"dedupe-window-00", "dedupe-window-01", "dedupe-window-03"} {
		if won, errs := retried(t, running, byBucket[b]); won != 0 || len(errs) != 0 {
			t.Fatalf("retries in %s: %d Won, errors %v, want Duplicate for each", b, won, errs)
		}
	}
}

// TestConcurrentWritersNeverLookRecreated: acknowledgements that arrive out of order, and the writes of other
// workers raising the bucket's sequence between a write and its acknowledgement, are never taken for a re-created
// bucket.
func TestConcurrentWritersNeverLookRecreated(t *testing.T) {
	s := natstest.Run(t)
	windows := []*kvwindow.Window{
		newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig()),
		newWindow(t, jsFor(t, s.URL()), kvwindow.DefaultConfig()),
	}
	const goroutines, keys = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, len(windows)*goroutines)
	for wi, w := range windows {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctxT(t, 30*time.Second)
				for i := range keys {
					// Both windows race for the same keys: half the claims win, half lose and read.
					key := fmt.Sprint("k-", g, "-", i)
					c := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: key, TTL: time.Hour,
						Claimant: envelope(uint64(1 + wi*10_000 + g*100 + i)), Delivery: delivery(1)}
					out, err := w.Claim(ctx, c, kvwindow.Known{})
					if err != nil {
						errs <- fmt.Errorf("window %d claim %s: %w", wi, key, err)
						return
					}
					if out.Status == kvwindow.Won {
						if _, _, err := w.MarkPublished(ctx, c, out.Revision, out.FirstClaimed); err != nil {
							errs <- fmt.Errorf("window %d mark %s: %w", wi, key, err)
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, w := range windows {
		if err := w.Ping(ctxT(t, 10*time.Second)); err != nil {
			t.Errorf("window %d: Ping: %v", i, err)
		}
	}
}
