package main

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

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
