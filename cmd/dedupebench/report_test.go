package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSummaryFormat(t *testing.T) {
	var b bytes.Buffer
	err := writeSummary(&b, Summary{WorkerFloor: 0.8312, WorkerNaive: 12.5, WorkerNative: 0.456,
		LatP50: 1.234, LatP99: 20, HeapKV: 612.4, HeapNative: 145.6, WorkerRSSMiB: 41.7})
	if err != nil {
		t.Fatal(err)
	}
	want := "worker/floor drain throughput: 0.83\n" +
		"worker/naive drain throughput: 12.50\n" +
		"worker/native drain throughput: 0.46\n" +
		"latency p50/p99 ms (worker live): 1.23/20.00\n" +
		"server heap per window key (bytes): 612 kv, 146 native\n" +
		"worker peak RSS (MiB): 42\n"
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
		!strings.Contains(b.String(), "server heap per window key (bytes): n/a kv, n/a native\n") {
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
