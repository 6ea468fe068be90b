package pipeline_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestRecreatedOutputMarksTakeover: a worker stored an event in DEDUPED and died before its ack; an operator then
// deleted DEDUPED and created it again, which forgets every Nats-Msg-Id of its duplicate window. The redelivery
// takes the claim over and publishes the event again under the same id, which the new stream cannot collapse: a
// consumer that read the first copy from the old stream reads it again. The worker cannot know whether the earlier
// delivery stored it, so the copy must be marked Dedupe-Possible-Duplicate, as a takeover older than the window is.
// Before: stored unmarked.
func TestRecreatedOutputMarksTakeover(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	// A worker claimed the event, stored it, and died before its ack.
	seq := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "out-re"), []byte("one"))
	e.claimedByDead(w, "out-re", seq, kvwindow.Delivery{})
	pub := nats.NewMsg("deduped.t1.gh")
	pub.Header.Set("Nats-Msg-Id", "t1:gh:out-re#"+envelopeID(seq, e.stamp(seq)))
	pub.Data = []byte("one")
	if _, err := e.js.PublishMsg(ctx(t), pub); err != nil {
		t.Fatal(err)
	}
	// The operator deletes DEDUPED and creates it again (here as the worker provisions it).
	if err := e.js.DeleteStream(ctx(t), pipeline.DefaultOutputStream); err != nil {
		t.Fatal(err)
	}
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}

	e.start(cfg)
	e.drained(15 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 {
		t.Fatalf("output holds %d messages, want the republished event", len(out))
	}
	if got := header(t, out[0], "Dedupe-Possible-Duplicate"); got != "true" {
		t.Errorf("republished into a re-created output unmarked (Dedupe-Possible-Duplicate=%q): the first copy "+
			"was stored in the stream deleted, whose duplicate window is gone", got)
	}
	if got := e.metric("dedupeworker_possible_duplicates_total"); got != 1 {
		t.Errorf("possible_duplicates_total = %v, want 1", got)
	}
}
