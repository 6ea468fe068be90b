package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Renaming the consumer (DEDUPE_CONSUMER) on the work-queue input stream it created is refused by the server, which
// allows one consumer per subject there: Provision explains that and names the consumer already reading, instead
// of the server's "multiple non-filtered consumers not allowed on workqueue stream"; Run stops on it rather than
// retry.
func TestProvisionRenamedConsumerOnWorkQueue(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.Consumer = "old"
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Consumer = "new"
	want := `pipeline: consumer "new": INGEST is a work-queue stream and consumer "old" already reads it; a work-queue stream allows ` +
		`one consumer per subject — delete the old one (nats consumer rm INGEST old) or set DEDUPE_CONSUMER=old`
	err := pipeline.Provision(ctx(t), e.js, cfg)
	var apiErr *jetstream.APIError
	if err == nil || err.Error() != want || !errors.Is(err, pipeline.ErrIncompatible) || !errors.As(err, &apiErr) {
		t.Fatalf("got  %v\nwant %s", err, want)
	}

	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Run(c); err == nil || err.Error() != want {
		t.Fatalf("Run: %v", err)
	}
	if c.Err() != nil {
		t.Fatal("Run retried until its context ended")
	}
}

// With several consumers on the stream (filtered ones, of other readers), each is named.
func TestProvisionConsumerConflictNamesEveryConsumer(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.Consumer = "old"
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, "old"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, filter string }{{"audit-a", "ingest.a.>"}, {"audit-b", "ingest.b.>"}} {
		if _, err := e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, jetstream.ConsumerConfig{
			Durable: f.name, FilterSubject: f.filter, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Consumer = "new"
	want := `pipeline: consumer "new": INGEST is a work-queue stream and consumers "audit-a", "audit-b" already read it; a work-queue stream ` +
		`allows one consumer per subject — delete the old one (nats consumer rm INGEST NAME) or set DEDUPE_CONSUMER to its name`
	if err := pipeline.Provision(ctx(t), e.js, cfg); err == nil || err.Error() != want || !errors.Is(err, pipeline.ErrIncompatible) {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}
