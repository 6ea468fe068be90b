//go:build unix

package pipeline_test

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// cpuTime is the CPU time the process has used so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipelineDrainDuplicates measures how fast a pipeline (default MaxInFlight, the KV window) drains 10,000
// copies of events whose claims are published: the duplicate path alone (claim refused, the holder's published
// claim read, ack). The events are published first, by another pipeline, so that no copy waits for its holder.
func BenchmarkPipelineDrainDuplicates(b *testing.B) {
	const n = 10000
	var total, cpu time.Duration
	for i := 0; i < b.N; i++ {
		e := newEnv(b)
		cfg := e.config(e.kvWindow())
		cfg.MaxInFlight = pipeline.DefaultMaxInFlight
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if err := pipeline.Provision(ctx(b), e.js, cfg); err != nil {
			b.Fatal(err)
		}
		deliver := func() {
			e.preload(n, func(j int) *nats.Msg {
				m := &nats.Msg{Subject: "ingest.acme.gh", Header: webhookHeaders(), Data: []byte(`{"n":1}`)}
				m.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", j))
				m.Header.Del("Nats-Msg-Id")
				return m
			})
		}
		deliver()
		first := e.start(cfg)
		e.drained(2 * time.Minute)
		first.stop(b)
		deliver()
		start, cpu0 := time.Now(), cpuTime(b)
		r := e.start(cfg)
		e.consumedWithin(5 * time.Minute)
		total += time.Since(start)
		cpu += cpuTime(b) - cpu0
		r.stop(b)
		if got := e.count(pipeline.DefaultOutputStream); got != n {
			b.Fatalf("output holds %d, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "copies/s")
	// The process's CPU time (the pipeline, and the in-process server's handling of its requests), steadier than
	// the rate on a shared machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(n*b.N), "cpu-µs/copy")
	b.ReportMetric(0, "ns/op")
}
