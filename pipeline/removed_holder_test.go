package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// An envelope that leaves a work-queue INGEST unacknowledged while it holds its event's claim (its worker died
// before publishing, then a limit, a purge or `nats stream rmm` deleted it) looks like a holder that finished: in
// a work-queue stream, absence is how an acknowledgement shows. The sender's retries are then taken as its
// duplicates until the claim's TTL ends. This is a stated condition (docs/failures.md, "An envelope deleted from
// INGEST while it holds its event's claim"), and `dedupeworker window forget` is its way out: once the claim is
// forgotten, the next retry is published.
func TestCopyOfRemovedHolderTakenAsDuplicate(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	seqA := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "rm-1"), []byte("a"))
	// A worker claimed A's key and died before publishing.
	e.claimedByDead(w, "rm-1", seqA, kvwindow.Delivery{})
	// A leaves INGEST unprocessed.
	s, err := e.js.Stream(ctx(t), pipeline.DefaultInputStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx(t), seqA); err != nil {
		t.Fatal(err)
	}
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "rm-1"), []byte("b")) // the sender's retry
	e.drained(15 * time.Second)
	natstest.Eventually(t, 10*time.Second, func() error {
		if d := e.metric("dedupeworker_envelopes_total", "outcome", "duplicate"); d != 1 {
			return fmt.Errorf("duplicates counted %v, want the retry's 1", d)
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Fatalf("output holds %d events; the condition docs/failures.md states has changed: update it", n)
	}

	// The way out: forget the claim, and the next retry is published.
	m, err := kvwindow.NewManager(ctx(t), e.js, kvwindow.Config{Bucket: w.Bucket()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if n, err := m.Forget(ctx(t), "t1", "gh", "rm-1"); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1 claim forgotten", n, err)
	}
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "rm-1"), []byte("c"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 15*time.Second)
}
