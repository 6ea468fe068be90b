package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A consumer re-created (or edited) by an operator under the running worker to deliver headers only: the worker
// refuses to bind it (each envelope would arrive without its body, be published empty and acknowledged out of the
// work-queue stream) and says not ready, naming why; the envelopes wait in INGEST.
func TestConsumerHeadersOnlyUnderRunningWorkerRefused(t *testing.T) {
	for _, how := range []string{"re-created", "edited"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config(memWindow())
			if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
				t.Fatal(err)
			}
			cfg.Provision = false // the operator's consumer, not one the worker creates in the meantime
			r := e.start(cfg)
			info, err := e.consumerInfo()
			if err != nil {
				t.Fatal(err)
			}
			cc := info.Config
			cc.HeadersOnly = true
			if how == "re-created" {
				if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
					t.Fatal(err)
				}
				_, err = e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, cc)
			} else {
				_, err = e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, cc)
			}
			if err != nil {
				t.Fatal(err)
			}
			r.waitUnreadyNaming(t, 10*time.Second, "headers only")
			e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", "d-1"), []byte(`{"body":"kept"}`))
			if n := e.count(pipeline.DefaultInputStream); n != 1 {
				t.Fatalf("INGEST holds %d envelopes, want the one published", n)
			}
			if n := e.count(pipeline.DefaultOutputStream); n != 0 {
				t.Fatalf("DEDUPED holds %d events, want none", n)
			}
		})
	}
}

// A consumer re-created by an operator under the running worker with a filter on the stream's own subjects (in
// FilterSubjects): bound, with the warning that nats-server never delivers some subjects to a filtered consumer.
func TestConsumerFilteredUnderRunningWorkerWarned(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Provision = false
	r := e.start(cfg)
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	cc := info.Config
	cc.FilterSubjects = []string{"ingest.>"}
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, cc); err != nil {
		t.Fatal(err)
	}
	e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", "d-1"), []byte(`{}`))
	e.waitCount(pipeline.DefaultOutputStream, 1, 20*time.Second)
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(e.log.String(), "filters on ingest.>") {
			return fmt.Errorf("no warning about the filter")
		}
		return r.p.Ready(ctx(t))
	})
}
