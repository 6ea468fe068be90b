package pipeline_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestDupWindowProbeStoresNothing holds the server to what waitDupWindowPassed relies on: its probe tells an id in
// the duplicate window from one that is not, and is stored in neither case.
func TestDupWindowProbeStoresNothing(t *testing.T) {
	e := newEnv(t)
	e.operatorOutput(jetstream.StreamConfig{Duplicates: time.Minute})
	if _, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: "deduped.t1.gh"}, jetstream.WithMsgID("stored")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		held bool
	}{{"stored", true}, {"never-published", false}} {
		held, err := e.dupWindowHolds("deduped.t1.gh", tc.id)
		if err != nil || held != tc.held {
			t.Errorf("%s: held %v, %v; want %v", tc.id, held, err, tc.held)
		}
	}
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d messages after the probes, want 1", n)
	}
}
