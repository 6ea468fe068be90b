package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency is a summary of end-to-end latencies.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
}

// summarizeLatency sorts ds in place and returns its percentiles (nearest rank).
func summarizeLatency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	return Latency{N: len(ds), P50: rank(0.50), P99: rank(0.99), Max: ds[len(ds)-1]}
}

// Result is one contender's run in one mode.
type Result struct {
	Contender string // floor, naive, native, worker, worker2
	Mode      string // drain, live
	Envelopes int
	Seconds   float64
	FirstAck  float64 // drain: seconds from start until the first envelope was acknowledged (startup included)
	Outputs   int     // outputs stored (DEDUPED messages; for native, INGEST messages)
	Expected  int
	Received  int // live: outputs seen on the core subscription

	ServerRSS int64   // server's peak resident memory during the run (sampled)
	ServerCPU float64 // server CPU seconds during the run
	WorkerRSS []int64 // peak RSS (VmHWM) of each worker process
	WorkerCPU []float64
	ClientCPU float64 // in-process contenders: CPU seconds of the bench process during the run

	Latency *Latency

	// Heap figures (0 when not measured): server live heap before the run and after it settled, and the number
	// of keys the server remembers for dedupe (bucket keys, or native message ids).
	HeapBefore, HeapAfter int64
	WindowKeys            int
	DLQ                   int
	heapFrom              *Result // the run whose heap figures stand for this one (see medianRun)
}

// Rate is envelopes per second.
func (r *Result) Rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Envelopes) / r.Seconds
}

// Mismatch reports whether the run produced a number of outputs other than the expected unique count.
func (r *Result) Mismatch() bool { return r.Outputs != r.Expected }

// HeapPerKey is (after − before) / keys, in bytes; ok is false when not measured.
func (r *Result) HeapPerKey() (float64, bool) {
	if r.heapFrom != nil {
		return r.heapFrom.HeapPerKey()
	}
	if r.WindowKeys <= 0 || r.HeapAfter == 0 {
		return 0, false
	}
	return float64(r.HeapAfter-r.HeapBefore) / float64(r.WindowKeys), true
}

// PeakWorkerRSS is the largest VmHWM among the worker processes.
func (r *Result) PeakWorkerRSS() int64 {
	var m int64
	for _, v := range r.WorkerRSS {
		m = max(m, v)
	}
	return m
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// writeTable prints one row per result.
func writeTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tmode\tenvelopes\tseconds\tenv/s\t1st ack s\toutputs\texpected\tsrv RSS MiB\tsrv CPU s\twkr RSS MiB\twkr CPU s\tp50 ms\tp99 ms\tmax ms\t")
	for _, r := range results {
		wrss, wcpu := "-", "-"
		if len(r.WorkerRSS) > 0 {
			parts := make([]string, len(r.WorkerRSS))
			for i, v := range r.WorkerRSS {
				parts[i] = mib(v)
			}
			wrss = strings.Join(parts, "+")
			total := 0.0
			for _, c := range r.WorkerCPU {
				total += c
			}
			wcpu = fmt.Sprintf("%.1f", total)
		} else if r.ClientCPU > 0 {
			wcpu = fmt.Sprintf("(%.1f)", r.ClientCPU)
		}
		p50, p99, mx := "-", "-", "-"
		if r.Latency != nil && r.Latency.N > 0 {
			p50, p99, mx = ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max)
		}
		first := "-"
		if r.FirstAck > 0 {
			first = fmt.Sprintf("%.2f", r.FirstAck)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%s\t%d\t%d\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Contender, r.Mode, r.Envelopes, r.Seconds, r.Rate(), first, r.Outputs, r.Expected,
			mib(r.ServerRSS), r.ServerCPU, wrss, wcpu, p50, p99, mx)
	}
	return tw.Flush()
}

// Summary holds the figures of the final lines; a NaN / negative value prints as n/a.
type Summary struct {
	WorkerFloor, WorkerNaive, WorkerNative float64
	LatP50, LatP99                         float64 // ms
	HeapKV, HeapNative                     float64 // bytes per key
	WorkerRSSMiB                           float64
	// CPU µs per envelope in the drain, client side and server side (medians over the rounds; see cpu.go).
	WorkerClientUS, WorkerServerUS, FloorClientUS, FloorServerUS float64
}

// NA marks a figure that was not measured.
var NA = math.NaN()

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtInt(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

// writeSummary prints the summary lines, exactly in this format, one figure each.
func writeSummary(w io.Writer, s Summary) error {
	_, err := fmt.Fprintf(w, "worker/floor drain throughput: %s\n"+
		"worker/naive drain throughput: %s\n"+
		"worker/native drain throughput: %s\n"+
		"latency p50/p99 ms (worker live): %s/%s\n"+
		"server heap per window key (bytes): %s kv, %s native\n"+
		"worker peak RSS (MiB): %s\n"+
		"worker client µs/envelope: %s\n"+
		"worker server µs/envelope: %s\n"+
		"floor client µs/envelope: %s\n"+
		"floor server µs/envelope: %s\n"+
		"worker/floor server µs/envelope: %s\n",
		fmtRatio(s.WorkerFloor), fmtRatio(s.WorkerNaive), fmtRatio(s.WorkerNative),
		fmtRatio(s.LatP50), fmtRatio(s.LatP99),
		fmtInt(s.HeapKV), fmtInt(s.HeapNative),
		fmtInt(s.WorkerRSSMiB),
		fmtUS(s.WorkerClientUS), fmtUS(s.WorkerServerUS), fmtUS(s.FloorClientUS), fmtUS(s.FloorServerUS),
		fmtRatio(s.WorkerServerUS/s.FloorServerUS))
	return err
}

// find returns the result of a contender in a mode, or nil.
func find(results []*Result, contender, mode string) *Result {
	for _, r := range results {
		if r.Contender == contender && r.Mode == mode {
			return r
		}
	}
	return nil
}

// summarize computes the summary figures from the results. kv heap per key comes from the worker drain when it
// was measured, else from floor's.
func summarize(results []*Result) Summary {
	s := Summary{WorkerFloor: NA, WorkerNaive: NA, WorkerNative: NA, LatP50: NA, LatP99: NA, HeapKV: NA, HeapNative: NA, WorkerRSSMiB: NA,
		WorkerClientUS: NA, WorkerServerUS: NA, FloorClientUS: NA, FloorServerUS: NA}
	worker := find(results, cWorker, "drain")
	ratio := func(other string) float64 {
		o := find(results, other, "drain")
		if worker == nil || o == nil || o.Rate() == 0 {
			return NA
		}
		return worker.Rate() / o.Rate()
	}
	s.WorkerFloor, s.WorkerNaive, s.WorkerNative = ratio(cFloor), ratio(cNaive), ratio(cNative)
	if live := find(results, cWorker, "live"); live != nil && live.Latency != nil && live.Latency.N > 0 {
		s.LatP50 = float64(live.Latency.P50) / float64(time.Millisecond)
		s.LatP99 = float64(live.Latency.P99) / float64(time.Millisecond)
	}
	for _, c := range []string{cWorker, cFloor} {
		if r := find(results, c, "drain"); r != nil {
			if v, ok := r.HeapPerKey(); ok {
				s.HeapKV = v
				break
			}
		}
	}
	if r := find(results, cNative, "drain"); r != nil {
		if v, ok := r.HeapPerKey(); ok {
			s.HeapNative = v
		}
	}
	if worker != nil && worker.PeakWorkerRSS() > 0 {
		s.WorkerRSSMiB = float64(worker.PeakWorkerRSS()) / (1 << 20)
	}
	return s
}
