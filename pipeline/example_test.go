package pipeline_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A worker: the window over KV, two declared sources, the default streams (created when missing), metrics on the
// default registry, and a graceful shutdown on Ctrl-C.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	nc, err := nats.Connect(nats.DefaultURL, nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	window, err := kvwindow.New(ctx, js, kvwindow.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	sources, err := keys.LoadSources([]byte(`
sources:
  github: {dedupe: github}
  orders: {dedupe: {json: data.order.id, ttl: 24h}}
`))
	if err != nil {
		log.Fatal(err)
	}

	cfg := pipeline.DefaultConfig() // INGEST → DEDUPED, DLQ DEDUPE_DLQ, consumer dedupeworker, Provision on
	cfg.JetStream = js
	cfg.Window = window
	cfg.Sources = sources
	cfg.Metrics = pipeline.NewMetrics(prometheus.DefaultRegisterer)
	p, err := pipeline.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	// Serve p.Ready on /readyz; Run returns once ctx is cancelled and in-flight envelopes are settled.
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
