package pipeline_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestSourcesRolloutAdmitsCopyOnce pins a stated condition (OPERATIONS.md, "Settings and sources"): while a
// changed sources file rolls out, replicas on the old file and replicas on the new one decide copies of one event
// by different rules. A source added is forwarded without dedupe by the old replicas, and a source whose key rule
// changed claims another key on each side: a copy handled on each side is published twice, with different
// Idempotency-Keys when the key changed, for up to one TTL after the switch. Each side alone collapses its copies.
func TestSourcesRolloutAdmitsCopyOnce(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
	}{
		{"source added", "sources:\n  gh: {dedupe: github}\n",
			"sources:\n  gh: {dedupe: github}\n  hooks: {dedupe: {header: X-Event-Id}}\n"},
		{"key rule changed", "sources:\n  hooks: {dedupe: {header: X-Event-Id}}\n",
			"sources:\n  hooks: {dedupe: {json: id}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config(e.kvWindow())
			load := func(doc string) keys.Sources {
				s, err := keys.LoadSources([]byte(doc))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			// One event, sent three times: the same delivery id in a header and the same event id in the body.
			send := func() { e.publish("ingest.t1.hooks", hdr("X-Event-Id", "d-1"), []byte(`{"id":"evt-1"}`)) }

			cfg.Sources = load(tc.before)
			old := e.start(cfg)
			send()
			e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
			old.stop(t)

			cfg.Sources = load(tc.after)
			cfg.Metrics = pipeline.NewMetrics(nil)
			e.start(cfg)
			send()
			send()
			e.drained(15 * time.Second)
			out := e.messages(pipeline.DefaultOutputStream)
			if len(out) != 2 {
				t.Fatalf("output holds %d events, want 2 (one per side of the rollout): the condition OPERATIONS.md "+
					"states has changed: update it", len(out))
			}
		})
	}
}
