package pipeline_test

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// webhookHeaders is a typical delivery's header set.
func webhookHeaders() nats.Header {
	return hdr(
		"Content-Type", "application/json",
		"User-Agent", "GitHub-Hookshot/abc123",
		"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"X-GitHub-Event", "push",
		"X-GitHub-Hook-ID", "292430182",
		"X-Hub-Signature-256", "sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c",
		"Ingest-Verified", "true",
		"Nats-Msg-Id", "ingest-chosen-id",
		"Idempotency-Key", "forged",
	)
}

// BenchmarkHandle measures the network-free part of handling one envelope: subject parsing, key extraction
// dispatch and building the outbound message (headers, idempotency key, Nats-Msg-Id).
func BenchmarkHandle(b *testing.B) {
	h := newHandler(b)
	body := []byte(`{"id":"evt_1N2b3c4d5e","object":"event","type":"charge.succeeded","data":{"object":{"id":"ch_1","amount":2000}}}`)
	cases := []struct{ name, subject string }{
		{"header-key", "ingest.acme.gh"},
		{"json-key", "ingest.acme.orders"},
		{"unkeyed", "ingest.acme.legacy"},
		{"dead-letter", "ingest.acme.bad+source"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			in := webhookHeaders()
			b.ReportAllocs()
			var seq uint64
			for b.Loop() {
				seq++
				m := h.Prepare(c.subject, in, body, seq, int64(seq))
				if m.Subject == "" {
					b.Fatal("no subject")
				}
			}
		})
	}
}

// BenchmarkPipelineDrain preloads 20,000 envelopes (distinct keys) and measures how fast a pipeline with the
// default MaxInFlight drains them through a real server: claim, publish, ack.
func BenchmarkPipelineDrain(b *testing.B) {
	const n = 20000
	for _, win := range []string{"memory", "kv"} {
		b.Run("window="+win, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				e := newEnv(b)
				var w pipeline.Window = memWindow()
				if win == "kv" {
					w = e.kvWindow()
				}
				cfg := e.config(w)
				cfg.MaxInFlight = pipeline.DefaultMaxInFlight
				cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				if err := pipeline.Provision(ctx(b), e.js, cfg); err != nil {
					b.Fatal(err)
				}
				e.preload(n, func(j int) *nats.Msg {
					m := &nats.Msg{Subject: "ingest.acme.gh", Header: webhookHeaders(), Data: []byte(`{"n":` + strconv.Itoa(j) + `}`)}
					m.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d-%d", i, j))
					m.Header.Del("Nats-Msg-Id")
					return m
				})
				start := time.Now()
				r := e.start(cfg)
				e.consumedWithin(5 * time.Minute)
				total += time.Since(start)
				r.stop(b)
				if got := e.count(pipeline.DefaultOutputStream); got != n {
					b.Fatalf("output holds %d, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/total.Seconds(), "envelopes/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
