package pipeline_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A consumer deleted under the running worker on an input stream that keeps processed envelopes is not created
// again from DEDUPE_CONSUMER_START left set from the worker's start ("all" would deliver every processed envelope
// again): the worker stays unready, saying the setting is for a start only.
func TestConsumerStartNotReusedUnderRunningWorker(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.CreateStream(ctx(t), jetstream.StreamConfig{Name: pipeline.DefaultInputStream, Subjects: []string{"ingest.>"}}); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(memWindow())
	cfg.ConsumerStart = "all"
	r := e.start(cfg)
	e.publish("ingest.t1.legacy", nil, []byte("processed"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	e.drained(10 * time.Second)
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		err := r.p.Ready(ctx(t))
		if err == nil || !errors.Is(err, pipeline.ErrConsumerStart) || !strings.Contains(err.Error(), "DEDUPE_CONSUMER_START") {
			return fmt.Errorf("ready = %v, want ErrConsumerStart naming DEDUPE_CONSUMER_START", err)
		}
		return nil
	})
	if _, err := e.consumerInfo(); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("consumer: %v, want not found (not created again)", err)
	}
}

// DEDUPE_CONSUMER_START ("new") left set on a work-queue input stream whose consumer is missing while envelopes
// wait: the setting is ignored with a warning naming it, and every waiting envelope is processed.
func TestConsumerStartIgnoredOnWorkQueue(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.publish("ingest.t1.legacy", nil, []byte{byte('a' + i)})
	}
	cfg.ConsumerStart = "new"
	e.start(cfg)
	e.waitCount(pipeline.DefaultOutputStream, 5, 10*time.Second)
	if log := e.log.String(); !strings.Contains(log, "DEDUPE_CONSUMER_START ignored") {
		t.Errorf("no warning naming DEDUPE_CONSUMER_START in the log:\n%s", log)
	}
}
