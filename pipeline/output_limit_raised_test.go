package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestOutputLimitRaisedBeforePoll: the output stream's maximum message size is lowered, the pipeline reads it, an
// operator raises it again and at once replays an event over the old limit — before the status poll reads the
// raise (here never: a poll an hour apart). The event must be published, keyed and unkeyed: the cached limit
// alone never dead-letters. Before, both were dead-lettered again.
func TestOutputLimitRaisedBeforePoll(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.StatusInterval = time.Hour
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 512, Duplicates: time.Minute})
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil { // before the start: its status poll finds everything
		t.Fatal(err)
	}
	e.start(cfg) // reads the 512-byte limit at its start
	st, err := e.js.Stream(ctx(t), pipeline.DefaultOutputStream)
	if err != nil {
		t.Fatal(err)
	}
	raised := st.CachedInfo().Config
	raised.MaxMsgSize = -1
	if _, err := e.js.UpdateStream(ctx(t), raised); err != nil {
		t.Fatal(err)
	}
	big := []byte(`{"pad":"` + strings.Repeat("x", 2048) + `"}`)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big-1"), big) // keyed
	e.publish("ingest.t1.legacy", nil, big)                           // unkeyed
	e.drained(10 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != 2 {
		t.Errorf("output holds %d, want both events", got)
	}
	if n, _ := e.tryCount(pipeline.DefaultDLQStream); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}

	// Lowered again: the stream's own limit still dead-letters (as the server would refuse the event).
	raised.MaxMsgSize = 512
	if _, err := e.js.UpdateStream(ctx(t), raised); err != nil {
		t.Fatal(err)
	}
	e.publish("ingest.t1.legacy", nil, big)
	e.drained(10 * time.Second)
	if n, _ := e.tryCount(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("%d dead letters, want the event over the lowered limit", n)
	}
}
