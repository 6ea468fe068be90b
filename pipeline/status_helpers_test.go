package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// drainedLimitedInput creates a work-queue INGEST with a count limit and discard old, has a worker publish n
// envelopes through it and stops the worker: a drained INGEST with limits, and the config the worker ran with.
func (e *env) drainedLimitedInput(n int) pipeline.Config {
	e.t.Helper()
	e.createStream(jetstream.StreamConfig{
		Name:      pipeline.DefaultInputStream,
		Subjects:  []string{"ingest.>"},
		Retention: jetstream.WorkQueuePolicy,
		MaxMsgs:   1000,
		Discard:   jetstream.DiscardOld,
	})
	cfg := e.config(memWindow())
	r := e.start(cfg)
	for i := range n {
		e.publish("ingest.acme.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("d-%d", i)), []byte(`{}`))
	}
	e.waitCount(pipeline.DefaultOutputStream, uint64(n), 20*time.Second)
	e.drained(20 * time.Second)
	r.stop(e.t)
	return cfg
}

// requestsInOnePoll is the subjects of the JetStream API requests matching subject (a wildcard) that one status poll
// of p sends: they go out on the test's own connection, so a flush after the poll has them all back.
func (e *env) requestsInOnePoll(p *pipeline.Pipeline, subject string) []string {
	e.t.Helper()
	reads := make(chan *nats.Msg, 1000)
	sub, err := e.nc.ChanSubscribe(subject, reads)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	pipeline.RefreshStatus(p, context.Background())
	if err := e.nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	var subjects []string
	for len(reads) > 0 {
		subjects = append(subjects, (<-reads).Subject)
	}
	return subjects
}

// waitUnreadyNaming waits (up to timeout) until the pipeline is not ready with a reason that contains what.
func (r *running) waitUnreadyNaming(t testing.TB, timeout time.Duration, what string) {
	t.Helper()
	natstest.Eventually(t, timeout, func() error {
		if err := r.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), what) {
			return fmt.Errorf("ready = %v, want not ready naming %q", err, what)
		}
		return nil
	})
}
