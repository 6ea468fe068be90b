package contract_test

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handle acts on one event, once per idempotency key: in a real service, one transaction that records the key
// (a unique constraint) and does the work (docs/consuming.md, "Acting once per Idempotency-Key").
func handle(ctx context.Context, idempotencyKey string, h nats.Header, body []byte) error { return nil }

// A downstream consumer of the unique events: a durable JetStream consumer with explicit acks, on the output
// prefix only (duplicate copies are stored in the same stream). docs/consuming.md shows consume, line for line
// (TestConsumingGoSnippet); it is written as a service outside this module would write it, with the literal names.
func Example_consume() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	if err := consume(ctx, js); err != nil {
		return
	}
}

func consume(ctx context.Context, js jetstream.JetStream) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, "DEDUPED", jetstream.ConsumerConfig{
		Durable:       "billing",
		FilterSubject: "deduped.>", // not the whole stream: duplicate copies are stored there too
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second, // longer than handling one event takes
		MaxDeliver:    -1,               // never give up on an event
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		h := m.Headers()
		if err := handle(ctx, h.Get("Idempotency-Key"), h, m.Data()); err != nil {
			_ = m.NakWithDelay(5 * time.Second) // redelivered: handle must be safe to run again
			return
		}
		_ = m.DoubleAck(ctx) // acknowledged only after handle committed
	})
	if err != nil {
		return err
	}
	defer cc.Stop()
	<-ctx.Done()
	return nil
}
