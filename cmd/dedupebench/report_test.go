package main

import (
	"bytes"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummaryFormat(t *testing.T) {
	var b bytes.Buffer
	err := writeSummary(&b, Summary{WorkerFloor: 0.8312, WorkerNaive: 12.5, WorkerNative: 0.456,
		LatP50: 1.234, LatP99: 20, HeapKV: 612.4, HeapNative: 145.6, WorkerRSSMiB: 41.7,
		WorkerClientUS: 91.04, WorkerServerUS: 96, FloorClientUS: 47.25, FloorServerUS: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := "worker/floor drain throughput: 0.83\n" +
		"worker/naive drain throughput: 12.50\n" +
		"worker/native drain throughput: 0.46\n" +
		"latency p50/p99 ms (worker live): 1.23/20.00\n" +
		"server heap per window key (bytes): 612 kv, 146 native\n" +
		"worker peak RSS (MiB): 42\n" +
		"worker client µs/envelope: 91.0\n" +
		"worker server µs/envelope: 96.0\n" +
		"floor client µs/envelope: 47.2\n" +
		"floor server µs/envelope: 64.0\n" +
		"worker/floor server µs/envelope: 1.50\n"
	if b.String() != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
	// The shape every consumer of these lines may rely on.
	shapes := []string{
		`^worker/floor drain throughput: \d+\.\d\d$`,
		`^worker/naive drain throughput: \d+\.\d\d$`,
		`^worker/native drain throughput: \d+\.\d\d$`,
		`^latency p50/p99 ms \(worker live\): \d+\.\d\d/\d+\.\d\d$`,
		`^server heap per window key \(bytes\): \d+ kv, \d+ native$`,
		`^worker peak RSS \(MiB\): \d+$`,
		`^worker client µs/envelope: \d+\.\d$`,
		`^worker server µs/envelope: \d+\.\d$`,
		`^floor client µs/envelope: \d+\.\d$`,
		`^floor server µs/envelope: \d+\.\d$`,
		`^worker/floor server µs/envelope: \d+\.\d\d$`,
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(shapes) {
		t.Fatalf("%d lines, want %d", len(lines), len(shapes))
	}
	for i, re := range shapes {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
}

func TestSummaryNotMeasured(t *testing.T) {
	var b bytes.Buffer
	s := summarize(nil)
	if err := writeSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "worker/floor drain throughput: n/a\n") ||
		!strings.Contains(b.String(), "latency p50/p99 ms (worker live): n/a/n/a\n") ||
		!strings.Contains(b.String(), "server heap per window key (bytes): n/a kv, n/a native\n") ||
		!strings.Contains(b.String(), "worker client µs/envelope: n/a\n") ||
		!strings.Contains(b.String(), "worker/floor server µs/envelope: n/a\n") {
		t.Fatalf("unmeasured figures should print n/a:\n%s", b.String())
	}
}

func TestSummarize(t *testing.T) {
	lat := summarizeLatency([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond})
	results := []*Result{
		{Contender: cFloor, Mode: "drain", Envelopes: 1000, Seconds: 1, HeapBefore: 1000, HeapAfter: 61000, WindowKeys: 100},
		{Contender: cNaive, Mode: "drain", Envelopes: 100, Seconds: 1},
		{Contender: cNative, Mode: "drain", Envelopes: 2000, Seconds: 1, HeapBefore: 0, HeapAfter: 15000, WindowKeys: 100},
		{Contender: cWorker, Mode: "drain", Envelopes: 800, Seconds: 1, WorkerRSS: []int64{50 << 20}},
		{Contender: cWorker, Mode: "live", Envelopes: 10, Latency: &lat},
	}
	s := summarize(results)
	if s.WorkerFloor != 0.8 || s.WorkerNaive != 8 || s.WorkerNative != 0.4 {
		t.Fatalf("ratios %v %v %v", s.WorkerFloor, s.WorkerNaive, s.WorkerNative)
	}
	if s.HeapKV != 600 || s.HeapNative != 150 || s.WorkerRSSMiB != 50 {
		t.Fatalf("heap %v %v rss %v", s.HeapKV, s.HeapNative, s.WorkerRSSMiB)
	}
	if s.LatP50 != 2 || s.LatP99 != 100 {
		t.Fatalf("latency %v/%v", s.LatP50, s.LatP99)
	}
}

func TestTableHasEveryRun(t *testing.T) {
	lat := Latency{N: 3, P50: time.Millisecond, P99: 5 * time.Millisecond, Max: 9 * time.Millisecond}
	var b bytes.Buffer
	err := writeTable(&b, []*Result{
		{Contender: cWorker2, Mode: "drain", Envelopes: 20000, Seconds: 2, Outputs: 15000, Expected: 15000,
			ServerRSS: 200 << 20, WorkerRSS: []int64{90 << 20, 100 << 20}, WorkerCPU: []float64{1, 1.5}},
		{Contender: cWorker, Mode: "live", Envelopes: 100, Seconds: 1, Latency: &lat},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"contender", "env/s", "worker2", "10000", "90+100", "2.5", "1.00", "5.00", "9.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestCPUPerEnvelope: the client side is the workers' CPU when there are workers, else the bench's own; each
// figure is its own median over the rounds; the table puts worker/floor beside the rate ratio.
func TestCPUPerEnvelope(t *testing.T) {
	drains := map[string][]*Result{
		cFloor: {
			{Contender: cFloor, Envelopes: 1000, Seconds: 1, ClientCPU: 0.050, ServerCPU: 0.060},
			{Contender: cFloor, Envelopes: 1000, Seconds: 2, ClientCPU: 0.040, ServerCPU: 0.080},
			{Contender: cFloor, Envelopes: 1000, Seconds: 1.6, ClientCPU: 0.045, ServerCPU: 0.070},
		},
		cWorker: {
			{Contender: cWorker, Envelopes: 1000, Seconds: 2, WorkerCPU: []float64{0.090}, ClientCPU: 0.001, ServerCPU: 0.100},
			{Contender: cWorker, Envelopes: 1000, Seconds: 1.6, WorkerCPU: []float64{0.080}, ClientCPU: 0.001, ServerCPU: 0.090},
			{Contender: cWorker, Envelopes: 1000, Seconds: 2.5, WorkerCPU: []float64{0.100}, ClientCPU: 0.001, ServerCPU: 0.110},
		},
		cWorker2: {{Contender: cWorker2, Envelopes: 1000, Seconds: 1, WorkerCPU: []float64{0.050, 0.060}, ServerCPU: 0.1}},
	}
	tests := []struct {
		contender             string
		client, server, total float64
	}{
		{cFloor, 45, 70, 115},
		{cWorker, 90, 100, 190},
		{cWorker2, 110, 100, 210},
	}
	for _, tc := range tests {
		c := medianCPU(drains[tc.contender])
		if math.Abs(c.client-tc.client) > 1e-9 || math.Abs(c.server-tc.server) > 1e-9 || math.Abs(c.totalUS-tc.total) > 1e-9 {
			t.Errorf("%s: client %v server %v total %v µs/env, want %v %v %v", tc.contender, c.client, c.server, c.totalUS, tc.client, tc.server, tc.total)
		}
	}
	s := summarize(nil).withCPU(drains)
	if s.WorkerClientUS != 90 || s.WorkerServerUS != 100 || s.FloorClientUS != 45 || s.FloorServerUS != 70 {
		t.Fatalf("summary CPU %+v", s)
	}
	var b bytes.Buffer
	if err := writeCPUTable(&b, drains); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"medians over 3 rounds", "45.0", "70.0", "115.0", "190.0", "210.0",
		"worker/floor           2.00           1.43          1.65   0.80"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("CPU table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRoundOrderRotates: every contender runs in every position once over as many rounds as contenders, and the
// first round keeps the plain order (the heap-measured runs first).
func TestRoundOrderRotates(t *testing.T) {
	cs := []string{cFloor, cNative, cWorker}
	if got := roundOrder(cs, 0); !slices.Equal(got, cs) {
		t.Fatalf("round 1: %v", got)
	}
	seen := map[string]map[int]bool{}
	for round := range len(cs) {
		for pos, c := range roundOrder(cs, round) {
			if seen[c] == nil {
				seen[c] = map[int]bool{}
			}
			seen[c][pos] = true
		}
	}
	for _, c := range cs {
		if len(seen[c]) != len(cs) {
			t.Errorf("%s ran in positions %v over %d rounds", c, seen[c], len(cs))
		}
	}
}
