package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestDeliveryOfEarlierConsumerStaysStale pins a stated condition (docs/failures.md, "The consumer re-created or
// edited by an operator"): claims order the deliveries of one envelope by their consumer's creation time first. A
// consumer older than the one that made an envelope's claim — INGEST restored from a backup taken before its
// consumer was last created again (a restore keeps the consumer's creation time) — delivers that envelope only as
// stale: nothing is published or acknowledged until the claim's TTL ends, and its event's copies wait for it. The
// way out is `window forget` of the claim; the next delivery then publishes it.
func TestDeliveryOfEarlierConsumerStaysStale(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	seq := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "restored"), []byte("a"))
	// The claim a delivery of a later consumer made before its worker died: as the restored consumer is older.
	later := info.Created.Add(time.Hour).UnixNano()
	e.claimedByDead(w, "restored", seq, kvwindow.Delivery{Consumer: later})
	e.start(cfg)
	natstest.Eventually(t, 10*time.Second, func() error {
		if n := e.metric("dedupeworker_stale_deliveries_total"); n < 1 {
			return fmt.Errorf("stale deliveries %v, want the envelope's", n)
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Fatalf("output holds %d events; the condition docs/failures.md states has changed: update it", n)
	}

	// The way out: forget the claim, and the envelope's next delivery (after the ack wait) publishes it.
	m, err := kvwindow.NewManager(ctx(t), e.js, kvwindow.Config{Bucket: w.Bucket()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if n, err := m.Forget(ctx(t), "t1", "gh", "restored"); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1 claim forgotten", n, err)
	}
	e.waitCount(pipeline.DefaultOutputStream, 1, 3*cfg.AckWait)
	e.drained(15 * time.Second)
}
