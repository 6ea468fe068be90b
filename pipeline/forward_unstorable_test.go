package pipeline_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestForwardedUnstorableLeavesItsCopy: with ForwardWhenWindowDown, a keyed envelope whose claim was made but
// answered with a failure (a timeout after the write) is forwarded unkeyed; when the output can never store it, it
// must not be dead-lettered and acknowledged while its claim stays in the window unreleased: a well-formed copy of
// the event would then find the claim held by an envelope gone from the input and be acknowledged as its duplicate,
// the event only in the dead-letter stream. The dead letter waits for the window instead (NAK), so that the
// envelope's redelivery claims, dead-letters and releases, and the copy is published.
func TestForwardedUnstorableLeavesItsCopy(t *testing.T) {
	e := newEnv(t)
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 1024, Duplicates: time.Minute})
	cfg := e.config(&lostAnswer{Window: e.kvWindow()})
	cfg.ForwardWhenWindowDown = true
	e.start(cfg)

	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "fu-1"), make([]byte, 2048)) // over the output's limit
	e.drained(15 * time.Second)
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Fatalf("%d dead letters, want the large copy's", n)
	}
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "fu-1"), []byte("small"))
	e.drained(15 * time.Second)

	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 {
		t.Fatalf("output holds %d messages, want the well-formed copy of the event (duplicates counted: %v)",
			len(out), e.metric("dedupeworker_envelopes_total", "outcome", "duplicate"))
	}
	if k := header(t, out[0], "Dedupe-Key"); k != "fu-1" {
		t.Errorf("output's Dedupe-Key %q, want fu-1", k)
	}
}
