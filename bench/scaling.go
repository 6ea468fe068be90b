package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// maxScaleReplicas is the most worker replicas -scaling starts at once.
const maxScaleReplicas = 16

// scaleTarget is the least share of the baseline's drain rate a scaling variant should keep: more replicas (or
// shards) may not add speed on a small machine, but they should not cost more than 10 %.
const scaleTarget = 0.90

// scaleOptions are the scale-out flags: -shards, -scaling, -scaling-shards.
type scaleOptions struct {
	shards        shardCount
	scaling       countList // replica counts of the scaling run
	scalingShards countList // window shard counts of the scaling run (empty: -shards)
}

// countList is a comma-separated list of distinct whole numbers from 1 to hi (0: no bound), in the given order.
type countList struct {
	vals []int
	hi   int
}

func (l *countList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(l.vals))
	for i, v := range l.vals {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (l *countList) Set(s string) error {
	hi := l.hi
	if hi <= 0 {
		hi = math.MaxInt32
	}
	var vals []int
	for _, p := range strings.Split(s, ",") {
		n, err := parseCount(p, hi)
		if err != nil {
			return err
		}
		if slices.Contains(vals, n) {
			return fmt.Errorf("%d listed twice", n)
		}
		vals = append(vals, n)
	}
	l.vals = vals
	return nil
}

// register declares the scale-out flags.
func (s *scaleOptions) register(fs *flag.FlagSet) {
	s.scaling.hi, s.scalingShards.hi = maxScaleReplicas, maxShards
	fs.Var(&s.shards, "shards", shardsUsage)
	fs.Var(&s.scaling, "scaling", fmt.Sprintf("replica-scaling run: `R1,R2,...` worker replicas (1-%d), e.g. 1,2,4. Each drain round (-repeat) runs the worker "+
		"with every count, in an order rotated by one each round (1,2,4; 2,4,1; 4,1,2), and the report gives each count's median and its ratio "+
		"to the first count. Without -contenders only the scaling run drains; without -modes there is no live phase", maxScaleReplicas))
	fs.Var(&s.scalingShards, "scaling-shards", "window shard counts `K1,K2,...` to interleave in the scaling run (each replica count with each K; "+
		"default: -shards); without -scaling the run uses 1 replica, so -scaling-shards 1,4 compares K=1 with K=4 round by round")
}

// scaleDefaults adjusts the other options to a scaling run: with -scaling (or -scaling-shards) only the scaling
// run drains unless -contenders is given, drain is always a mode, live only when -modes asks for it, and the RSS
// check runs only when -rss-check asks for it.
func (o *options) scaleDefaults(set map[string]bool) {
	if len(o.scalingShards.vals) > 0 && len(o.scaling.vals) == 0 {
		o.scaling.vals = []int{1}
	}
	if len(o.scaling.vals) == 0 {
		return
	}
	if !set["contenders"] {
		o.contenders = nil
	}
	if !set["modes"] {
		o.modes = []string{"drain"}
	} else if !slices.Contains(o.modes, "drain") {
		o.modes = append(o.modes, "drain")
	}
	if !set["rss-check"] {
		o.rssCheck = false
	}
}

// workerVariant is a worker contender: its label (which is also its kind), replicas and window shards.
type workerVariant struct {
	label            string
	replicas, shards int
}

// scaleKind is the kind (and label) of a scaling variant: worker-x<R>, or worker-x<R>-k<K> when the run compares
// shard counts.
func scaleKind(replicas, shards int) string {
	if shards > 0 {
		return fmt.Sprintf("worker-x%d-k%d", replicas, shards)
	}
	return fmt.Sprintf("worker-x%d", replicas)
}

// parseScaleKind reads a kind made by scaleKind (shards 0: not given).
func parseScaleKind(kind string) (workerVariant, bool) {
	rest, ok := strings.CutPrefix(kind, "worker-x")
	if !ok {
		return workerVariant{}, false
	}
	reps, ks, hasK := strings.Cut(rest, "-k")
	r, err := strconv.Atoi(reps)
	if err != nil || r < 1 || strconv.Itoa(r) != reps {
		return workerVariant{}, false
	}
	v := workerVariant{label: kind, replicas: r}
	if hasK {
		k, err := strconv.Atoi(ks)
		if err != nil || k < 1 || strconv.Itoa(k) != ks {
			return workerVariant{}, false
		}
		v.shards = k
	}
	return v, true
}

// contenderClass maps every worker kind (worker, worker2, worker-x<R>[-k<K>]) to worker; other kinds to themselves.
func contenderClass(kind string) string {
	if _, ok := parseScaleKind(kind); ok {
		return cWorker
	}
	if kind == cWorker2 {
		return cWorker
	}
	return kind
}

// variant is what a run of kind starts: its worker replicas (0 for a contender that is not a worker) and the
// window's shards (-shards unless the kind names its own).
func (b *bench) variant(kind string) workerVariant {
	k := b.opts.shards.k()
	switch kind {
	case cWorker:
		return workerVariant{label: kind, replicas: 1, shards: k}
	case cWorker2:
		return workerVariant{label: kind, replicas: 2, shards: k}
	}
	if v, ok := parseScaleKind(kind); ok {
		if v.shards == 0 {
			v.shards = k
		}
		return v
	}
	return workerVariant{label: kind, shards: k}
}

// workerSpec is how to start the replicas of a worker kind.
func (b *bench) workerSpec(kind string) workerSpec {
	v := b.variant(kind)
	return workerSpec{bin: b.workerBin, replicas: max(v.replicas, 1), shards: v.shards, maxInFlight: b.opts.maxInFlight,
		pprof: b.opts.cpuprofile != "", consumerStart: b.opts.inputRetention.workerConsumerStart()}
}

// variants are the scaling run's workers, replica counts outer and shard counts inner, in the order given; the
// first is the baseline of the ratios.
func (s scaleOptions) variants() []workerVariant {
	var out []workerVariant
	for _, r := range s.scaling.vals {
		if len(s.scalingShards.vals) == 0 {
			out = append(out, workerVariant{label: scaleKind(r, 0), replicas: r, shards: s.shards.k()})
			continue
		}
		for _, k := range s.scalingShards.vals {
			out = append(out, workerVariant{label: scaleKind(r, k), replicas: r, shards: k})
		}
	}
	return out
}

// roundOrder is the order in which round (from 0) runs the variants: rotated by one each round, so that no
// variant always goes first (or last).
func roundOrder[T any](vs []T, round int) []T {
	out := make([]T, 0, len(vs))
	for j := range vs {
		out = append(out, vs[(round+j)%len(vs)])
	}
	return out
}

// scaleState is the scaling run's progress (and which shard counts have had their key spread noted).
type scaleState struct {
	runs        map[string][]*Result // by variant label, in round order
	orders      [][]string           // labels in the order each round ran them
	medians     map[string]*Result
	loadAfter   string       // load average right after the last drain of the scaling run
	spreadNoted map[int]bool // under bench.notesMu
}

// scalingRound runs round (from 0) of the scaling run, if there is one: a worker drain of w for each variant, in
// the round's order. Round one measures each variant's server heap. After the last round the median run of each
// variant joins the results.
func (b *bench) scalingRound(ctx context.Context, w *Workload, round int) error {
	vs := b.opts.variants()
	if len(vs) == 0 {
		return nil
	}
	if b.scale.runs == nil {
		b.scale.runs, b.scale.medians = map[string][]*Result{}, map[string]*Result{}
	}
	var labels []string
	for _, v := range roundOrder(vs, round) {
		labels = append(labels, v.label)
		r, err := b.drain(ctx, v.label, v.label, w, drainOpts{heap: round == 0})
		if err != nil {
			return err
		}
		b.scale.runs[v.label] = append(b.scale.runs[v.label], r)
	}
	b.scale.orders = append(b.scale.orders, labels)
	if round < b.opts.repeat-1 {
		return nil
	}
	b.scale.loadAfter = loadAverage()
	for _, v := range vs {
		rs := b.scale.runs[v.label]
		med := medianRun(rs)
		b.scale.medians[v.label] = med
		b.results = append(b.results, med)
		for _, r := range rs {
			if r.Mismatch() && r != med {
				b.results = append(b.results, r) // a wrong count is never hidden by the median
			}
		}
	}
	return nil
}

// writeScaling prints the scaling run's table and verdicts (nothing without a scaling run).
func (b *bench) writeScaling(out io.Writer) {
	if len(b.scale.medians) == 0 {
		return
	}
	load := fmt.Sprintf("%s after the last drain, %s at the end", b.scale.loadAfter, loadAverage())
	writeScalingReport(out, b.opts.variants(), b.scale.runs, b.scale.medians, b.scale.orders, load)
}

// steadyRate is a drain's rate from its first acknowledgement to its end: without process start, connecting and
// provisioning, which a drain of a few seconds pays once per replica. It is 0 (unknown) when the first ack is
// unknown or came in the last quarter of the run: the drain is polled every 25 ms, too coarse for what is left.
func steadyRate(r *Result) float64 {
	if r.FirstAck <= 0 || r.Seconds-r.FirstAck < 0.75*r.Seconds {
		return 0
	}
	return float64(r.Envelopes) / (r.Seconds - r.FirstAck)
}

// medianOf is the median of vs (the lower middle one for an even count; 0 for none).
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// writeScalingReport prints, for each variant, its median drain rate and ratio to the baseline (the first
// variant), every round's rate and ratio to the baseline's rate in the same round, the median rate from the first
// acknowledgement (steadyRate) and its ratio, the CPU per envelope of the median run (workers + server) and the
// server heap per window key; then a verdict per variant against scaleTarget.
func writeScalingReport(out io.Writer, vs []workerVariant, runs map[string][]*Result, medians map[string]*Result, orders [][]string, load string) {
	if len(vs) == 0 || medians[vs[0].label] == nil {
		return
	}
	base := vs[0]
	baseMed := medians[base.label].Rate()
	steady := map[string]float64{}
	for _, v := range vs {
		var rates []float64
		for _, r := range runs[v.label] {
			if sr := steadyRate(r); sr > 0 {
				rates = append(rates, sr)
			}
		}
		steady[v.label] = medianOf(rates)
	}
	fmt.Fprintln(out)
	var ord []string
	for i, o := range orders {
		ord = append(ord, fmt.Sprintf("%d: %s", i+1, strings.Join(o, " ")))
	}
	fmt.Fprintf(out, "scaling: worker drain, %d round(s), order by round: %s; load average %s\n", len(runs[base.label]), strings.Join(ord, "; "), load)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "contender\treplicas\tshards\tmedian env/s\tvs %s\tenv/s by round\tvs %s by round\tfrom 1st ack env/s\tvs %s\tCPU µs/env wkr+srv\theap B/key\t\n",
		base.label, base.label, base.label)
	for _, v := range vs {
		med := medians[v.label]
		if med == nil {
			continue
		}
		var rates, ratios []string
		for i, r := range runs[v.label] {
			rates = append(rates, fmt.Sprintf("%.0f", r.Rate()))
			if br := runs[base.label]; i < len(br) && br[i].Rate() > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2f", r.Rate()/br[i].Rate()))
			}
		}
		cpu := med.ServerCPU
		for _, c := range med.WorkerCPU {
			cpu += c
		}
		heap := "-"
		if h, ok := med.HeapPerKey(); ok {
			heap = fmt.Sprintf("%.0f", h)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%.0f\t%s\t\n", v.label, v.replicas, v.shards, med.Rate(), fmtRatio(med.Rate()/baseMed),
			strings.Join(rates, ", "), strings.Join(ratios, ", "), steady[v.label], fmtRatio(steady[v.label]/steady[base.label]),
			1e6*cpu/float64(max(med.Envelopes, 1)), heap)
	}
	_ = tw.Flush()
	verdict := func(ratio float64) string {
		if ratio < scaleTarget {
			return "NOT within 10%"
		}
		return "within 10%"
	}
	for _, v := range vs[1:] {
		med := medians[v.label]
		if med == nil || baseMed <= 0 {
			continue
		}
		ratio := med.Rate() / baseMed
		line := fmt.Sprintf("scaling: %s drains at %.2f of %s (%+.0f%%: %s)", v.label, ratio, base.label, 100*(ratio-1), verdict(ratio))
		if s, b := steady[v.label], steady[base.label]; s > 0 && b > 0 {
			line += fmt.Sprintf("; from the first ack %.2f (%+.0f%%: %s)", s/b, 100*(s/b-1), verdict(s/b))
		}
		fmt.Fprintln(out, line+"; target: no more than 10% slower")
	}
}

// loadAverage is the 1, 5 and 15 minute load average ("?" when unknown).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// reportLine names the window shards (and the scaling run) in the report.
func (s scaleOptions) reportLine() string {
	line := windowLine(s.shards.k())
	if vs := s.variants(); len(vs) > 0 {
		labels := make([]string, len(vs))
		for i, v := range vs {
			labels[i] = fmt.Sprintf("%s (%d replica(s), %d shard(s))", v.label, v.replicas, v.shards)
		}
		line += "\nscaling run: worker drain of " + strings.Join(labels, ", ") + "; ratios are to " + vs[0].label
	}
	return line
}

// medianRun returns the run with the median rate (the lower middle one for an even count). The heap figures
// of round one are carried over, since only that round measures them.
func medianRun(rs []*Result) *Result {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b *Result) int {
		switch {
		case a.Rate() < b.Rate():
			return -1
		case a.Rate() > b.Rate():
			return 1
		}
		return 0
	})
	m := sorted[(len(sorted)-1)/2]
	if m != rs[0] && rs[0].HeapBefore > 0 {
		m.heapFrom = rs[0]
	}
	return m
}
