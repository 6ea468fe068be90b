package pipeline_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// An existing consumer keeps its MaxAckPending unless the configuration sets one; set, Provision updates it (and
// keeps the consumer's ack wait).
func TestProvisionUpdatesMaxAckPendingOnlyWhenSet(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	if _, err := e.js.CreateStream(ctx(t), jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateConsumer(ctx(t), "INGEST", jetstream.ConsumerConfig{Durable: "dedupeworker",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 2, AckWait: cfg.AckWait}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ set, want int }{{0, 2}, {5, 5}, {0, 5}} {
		cfg.MaxAckPending = tc.set
		if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
			t.Fatal(err)
		}
		info, err := e.consumerInfo()
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxAckPending != tc.want || info.Config.AckWait != cfg.AckWait {
			t.Errorf("MaxAckPending set %d: consumer has MaxAckPending %d, AckWait %s; want %d, %s", tc.set,
				info.Config.MaxAckPending, info.Config.AckWait, tc.want, cfg.AckWait)
		}
	}
}
