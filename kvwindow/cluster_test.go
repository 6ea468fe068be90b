package kvwindow_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/nats-io/nats.go"
)

// TestReplicated runs claims against an R3 bucket through connections to every node of a 3-node cluster, then
// stops the bucket's stream leader mid-way: each key must end up with exactly one holder.
func TestReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster in -short")
	}
	c := natstest.RunCluster(t, 3)
	cfg := kvwindow.DefaultConfig()
	cfg.Replicas = 3
	var ws []*kvwindow.Window
	for i := range c.Servers {
		// Connection i prefers node i, then fails over to the others.
		var urls []string
		for j := range c.Servers {
			urls = append(urls, c.Servers[(i+j)%len(c.Servers)].URL())
		}
		js := jsFor(t, strings.Join(urls, ","), nats.DontRandomize())
		ws = append(ws, newWindow(t, js, cfg))
	}

	var retries, owned atomic.Int64
	type result struct {
		out kvwindow.Outcome
		err error
	}
	// claimAll has perKey claimants (spread over the windows) claim key at once, each retrying after
	// ErrUnavailable until it gets an answer, and returns the answers.
	claimAll := func(key string, perKey int, base uint64) []result {
		res := make([]result, perKey)
		var wg sync.WaitGroup
		for i := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := ws[i%len(ws)]
				cl := kvwindow.Claim{Tenant: "acme", Source: "hooks", Key: key, TTL: time.Hour, Claimant: envelope(base + uint64(i)), Delivery: delivery(1)}
				deadline := time.Now().Add(30 * time.Second)
				for {
					out, err := w.Claim(ctxT(t, 10*time.Second), cl, kvwindow.Known{})
					if err == nil || time.Now().After(deadline) {
						res[i] = result{out, err}
						return
					}
					if !errors.Is(err, kvwindow.ErrUnavailable) {
						res[i] = result{out, err}
						return
					}
					if retries.Add(1) <= 3 {
						t.Logf("during failover: %v", err)
					}
					time.Sleep(50 * time.Millisecond) // back off before the same claimant retries
				}
			}()
		}
		wg.Wait()
		return res
	}
	// check: exactly one claimant holds the key; nobody else was told Won; the rest see its revision.
	check := func(key string, res []result) {
		t.Helper()
		holders, won := 0, 0
		var rev uint64
		for i, r := range res {
			if r.err != nil {
				t.Fatalf("%s claimant %d: %v", key, i, r.err)
			}
			switch r.out.Status {
			case kvwindow.Won:
				won++
				holders++
				rev = r.out.Revision
			case kvwindow.Owned:
				holders++
				owned.Add(1)
				rev = r.out.Revision
			}
		}
		if holders != 1 || won > 1 {
			t.Fatalf("%s: %d holders, %d Won: %+v", key, holders, won, res)
		}
		for i, r := range res {
			if r.out.Revision != rev {
				t.Fatalf("%s claimant %d: %+v, holder has revision %d", key, i, r.out, rev)
			}
		}
	}

	// Phase 1: many keys, 9 concurrent claimants each (3 per node), all keys at once. On a loaded machine a claim
	// can time out and still land; its claimant's retry then finds it Owned, so "one holder" is the invariant
	// (and Won at most once).
	const keys1, perKey = 60, 9
	var wg sync.WaitGroup
	results := make([][]result, keys1)
	for k := range keys1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[k] = claimAll(fmt.Sprintf("p1-%d", k), perKey, uint64(k*100+1))
		}()
	}
	wg.Wait()
	for k := range keys1 {
		check(fmt.Sprintf("p1-%d", k), results[k])
	}
	logStats(t, "phase 1", ws)
	t.Logf("phase 1: %d claims retried after ErrUnavailable, %d keys held as Owned after a retry", retries.Load(), owned.Load())
	retries.Store(0)
	owned.Store(0)

	// Phase 1b: deliveries of one envelope race through every node (takeovers meet 10164 on a replicated
	// stream); the latest delivery ends up holding the claim, and releases it through another node.
	const keys1b, deliveries = 10, 9
	for k := range keys1b {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("p1b-%d", k)
			outs := make([]kvwindow.Outcome, deliveries)
			var dwg sync.WaitGroup
			for i := range deliveries {
				dwg.Add(1)
				go func() {
					defer dwg.Done()
					cl := kvwindow.Claim{Tenant: "acme", Source: "hooks", Key: key, TTL: time.Hour, Claimant: envelope(uint64(50000 + k)), Delivery: delivery(uint64(i + 1))}
					deadline := time.Now().Add(30 * time.Second)
					for {
						out, err := ws[i%len(ws)].Claim(ctxT(t, 10*time.Second), cl, kvwindow.Known{})
						if err == nil {
							outs[i] = out
							return
						}
						if !errors.Is(err, kvwindow.ErrUnavailable) || time.Now().After(deadline) {
							t.Errorf("%s delivery %d: %v", key, i+1, err)
							return
						}
						retries.Add(1)
						time.Sleep(50 * time.Millisecond) // back off before the same delivery retries
					}
				}()
			}
			dwg.Wait()
			won := 0
			for _, o := range outs {
				if o.Status == kvwindow.Won {
					won++
				}
			}
			last := outs[deliveries-1]
			if won > 1 || (last.Status != kvwindow.Won && last.Status != kvwindow.Owned) {
				t.Errorf("%s: %d Won, last delivery %+v: %+v", key, won, last, outs)
				return
			}
			cl := kvwindow.Claim{Tenant: "acme", Source: "hooks", Key: key, TTL: time.Hour, Claimant: envelope(uint64(50000 + k)), Delivery: delivery(deliveries - 1)}
			if got, err := ws[(k+1)%3].Claim(ctxT(t, 10*time.Second), cl, kvwindow.Known{}); err != nil || decision(got) != (kvwindow.Outcome{Status: kvwindow.Stale, Revision: last.Revision}) {
				t.Errorf("%s: earlier delivery afterwards: %+v %v, want Stale rev %d", key, got, err, last.Revision)
				return
			}
			if ok, err := ws[(k+2)%3].Release(ctxT(t, 10*time.Second), cl, last.Revision-1, false); ok || err != nil {
				t.Errorf("%s: release of an older revision: %v %v", key, ok, err)
				return
			}
			if ok, err := ws[(k+1)%3].Release(ctxT(t, 10*time.Second), cl, last.Revision, false); !ok || err != nil {
				t.Errorf("%s: release by the holder: %v %v", key, ok, err)
				return
			}
			cl.Claimant = envelope(uint64(60000 + k))
			if got, err := ws[k%3].Claim(ctxT(t, 10*time.Second), cl, kvwindow.Known{}); err != nil || got.Status != kvwindow.Won {
				t.Errorf("%s: claim after release: %+v %v", key, got, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	logStats(t, "phase 1b", ws)
	t.Logf("phase 1b: %d deliveries retried after ErrUnavailable", retries.Load())
	retries.Store(0)

	// Phase 2: stop the stream leader while claims are in flight. A claim may time out and still land; the same
	// claimant's retry then finds it Owned, so "one holder" is the invariant.
	leader := c.StreamLeader("KV_"+cfg.Bucket, 10*time.Second)
	const batches, perBatch = 8, 10
	stopped := make(chan struct{})
	for b := range batches {
		if b == 2 {
			go func() {
				leader.Shutdown()
				close(stopped)
			}()
		}
		results := make([][]result, perBatch)
		var wg sync.WaitGroup
		for k := range perBatch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[k] = claimAll(fmt.Sprintf("p2-%d-%d", b, k), 3, uint64(100000+b*1000+k*10))
			}()
		}
		wg.Wait()
		for k := range perBatch {
			check(fmt.Sprintf("p2-%d-%d", b, k), results[k])
		}
	}
	<-stopped
	newLeader := c.StreamLeader("KV_"+cfg.Bucket, 10*time.Second)
	if newLeader == leader {
		t.Fatal("leader did not change")
	}
	// Claims from phase 1 survived the failover.
	for k := range 5 {
		key := fmt.Sprintf("p1-%d", k)
		out := claim(t, ws[k%3], kvwindow.Claim{Tenant: "acme", Source: "hooks", Key: key, TTL: time.Hour, Claimant: envelope(999999), Delivery: delivery(1)})
		if out.Status != kvwindow.Duplicate {
			t.Fatalf("%s after failover: %+v", key, out)
		}
	}
	// A leader change keeps the bucket's creation time: no window takes it for a re-created bucket.
	for i, w := range ws {
		natstest.Eventually(t, 20*time.Second, func() error {
			err := w.Ping(ctxT(t, 5*time.Second))
			if errors.Is(err, kvwindow.ErrWindowLost) {
				t.Fatalf("window %d after the failover: %v", i, err)
			}
			return err
		})
	}
	logStats(t, "after failover", ws)
	t.Logf("failover: %d claims retried after ErrUnavailable, %d keys held as Owned after a retry", retries.Load(), owned.Load())
}

func logStats(t *testing.T, phase string, ws []*kvwindow.Window) {
	for i, w := range ws {
		a, b, m, e := kvwindow.Stats(w)
		t.Logf("%s: window %d: 10071=%d 10164=%d markers=%d empty-reads=%d takeovers=%d", phase, i, a, b, m, e, kvwindow.Takeovers(w))
	}
}
