package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

type bench struct {
	opts      options
	ps        *procs
	tmp       string
	serverBin string
	workerBin string
	log       io.Writer
	deferred  sync.WaitGroup
	notes     []string
	notesMu   sync.Mutex

	results       []*Result
	drains        map[string][]*Result // drain runs by contender, in round order (drainPhase)
	profiled      bool                 // the worker drain with -cpuprofile has run
	floorProfiled bool                 // the floor drain with -cpuprofile has run
	scale         scaleState
	ingest        ingestState
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "dedupebench: "+format+"\n", args...)
}

func (b *bench) note(format string, args ...any) {
	b.notesMu.Lock()
	defer b.notesMu.Unlock()
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

func (b *bench) has(c string) bool  { return slices.Contains(b.opts.contenders, c) }
func (b *bench) mode(m string) bool { return slices.Contains(b.opts.modes, m) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	opts, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dedupebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{opts: opts, ps: &procs{}, tmp: tmp, log: stderr}
	defer b.ps.killAll() // runs before the temp dir goes: no process keeps writing into it

	wd, _ := os.Getwd()
	root, rootErr := productRoot(wd)
	b.serverBin = opts.serverBin
	if b.serverBin == "" {
		if rootErr != nil {
			return fmt.Errorf("building nats-server: %w (run from the repository or pass -nats-server-bin)", rootErr)
		}
		b.serverBin = filepath.Join(tmp, "nats-server")
		b.logf("building nats-server")
		if err := goBuild(ctx, root, b.serverBin, "github.com/nats-io/nats-server/v2"); err != nil {
			return err
		}
	}
	if b.has(cWorker) || b.has(cWorker2) || len(opts.scaling.vals) > 0 || b.mode(modeIngest) {
		b.workerBin = opts.workerBin
		if b.workerBin == "" {
			if rootErr != nil {
				return fmt.Errorf("building the worker: %w (run from the repository or pass -worker-bin)", rootErr)
			}
			b.workerBin = filepath.Join(tmp, "dedupeworker")
			b.logf("building dedupeworker")
			if err := goBuild(ctx, root, b.workerBin, "./cmd/dedupeworker"); err != nil {
				return err
			}
		}
	}

	var corpus *Corpus
	if dir := FindCorpus(opts.corpus); dir != "" {
		if corpus, err = LoadCorpus(dir); err != nil {
			return err
		}
	} else {
		corpus = GeneratedCorpus(opts.seed, 256)
	}
	w := NewWorkload(WorkloadConfig{N: opts.n, Seed: opts.seed}, corpus)
	writeHeader(stdout, opts, w)

	add := func(r *Result, err error) error {
		if r != nil {
			b.results = append(b.results, r)
		}
		return err
	}
	if b.mode("drain") {
		if err := b.drainPhase(ctx, w); err != nil {
			return err
		}
	}
	if opts.cpuprofile != "" && !b.profiled {
		b.note("cpuprofile: no worker drain ran (-contenders worker, -modes drain): no profile written")
	}
	if opts.cpuprofile != "" && !b.floorProfiled && b.has(cFloor) { // a run without the floor wants no floor profile
		b.note("cpuprofile: no floor drain ran (-contenders floor, -modes drain): no %s written", opts.cpuprofile+".floor")
	}
	if b.mode("live") {
		for _, c := range []string{cFloor, cWorker} {
			if b.has(c) {
				if err := add(b.live(ctx, c, w.Prefix(opts.liveN))); err != nil {
					return err
				}
			}
		}
	}
	if b.mode(modeIngest) {
		if err := b.ingestPhase(ctx, w); err != nil {
			return err
		}
	}
	var rssLines []string
	if opts.rssCheck && b.has(cWorker) {
		big := w
		if len(big.Envelopes) < 200_000 {
			big = NewWorkload(WorkloadConfig{N: 200_000, Seed: opts.seed}, corpus)
		}
		small, err := b.drain(ctx, "worker@50k", cWorker, big.Prefix(50_000), drainOpts{})
		if err := add(small, err); err != nil {
			return err
		}
		large := find(b.results, cWorker, "drain")
		if large == nil || large.Envelopes != 200_000 {
			large, err = b.drain(ctx, "worker@200k", cWorker, big, drainOpts{})
			if err := add(large, err); err != nil {
				return err
			}
		}
		a, z := small.PeakWorkerRSS(), large.PeakWorkerRSS()
		verdict := "within 10%"
		if a > 0 && math.Abs(float64(z)/float64(a)-1) > 0.10 {
			verdict = "NOT within 10%"
		}
		rssLines = append(rssLines, fmt.Sprintf("rss check: worker peak RSS %s MiB at 50k envelopes, %s MiB at 200k (%+.1f%%, %s)",
			mib(a), mib(z), 100*(float64(z)/float64(max(a, 1))-1), verdict))
	}
	b.deferred.Wait()
	results := b.results

	fmt.Fprintf(stdout, "\n%s\n%s\n", opts.inputRetention.reportLine(), opts.scaleOptions.reportLine()) // just above the table, so that it is quoted with it
	if err := writeTable(stdout, results); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if len(b.drains) > 0 {
		if err := writeCPUTable(stdout, b.drains); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	}
	for _, r := range results {
		h := r
		if h.heapFrom != nil {
			h = h.heapFrom
		}
		if v, ok := h.HeapPerKey(); ok {
			extra := ""
			if r.Contender != cNative && b.opts.settle < outputDupWindow {
				extra = fmt.Sprintf(" (includes %s's message ids, kept for its %s duplicate window)", outputStream, outputDupWindow)
			}
			fmt.Fprintf(stdout, "server heap: %s %s: %.1f MiB before, %.1f MiB %s after the run, %d keys remembered: %.0f bytes/key%s\n",
				r.Contender, r.Mode, float64(h.HeapBefore)/(1<<20), float64(h.HeapAfter)/(1<<20), b.opts.settle, h.WindowKeys, v, extra)
		}
	}
	for _, n := range b.notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	b.writeScaling(stdout)
	ingestErr := b.writeIngest(stdout)
	for _, l := range rssLines {
		fmt.Fprintln(stdout, l)
	}
	var mismatches []string
	for _, r := range results {
		if r.Mismatch() {
			mismatches = append(mismatches, fmt.Sprintf("MISMATCH: %s %s: %d outputs, expected %d unique (%d envelopes)",
				r.Contender, r.Mode, r.Outputs, r.Expected, r.Envelopes))
		}
	}
	for _, m := range mismatches {
		fmt.Fprintln(stdout, m)
	}
	fmt.Fprintln(stdout)
	if err := writeSummary(stdout, summarize(results).withCPU(b.drains)); err != nil {
		return err
	}
	if len(mismatches) > 0 {
		return fmt.Errorf("%d run(s) produced the wrong number of outputs", len(mismatches))
	}
	return ingestErr
}

func writeHeader(w io.Writer, o options, wl *Workload) {
	st := wl.Stats()
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Fprintf(w, "machine: %d CPUs, %s memory, %s %s/%s, load average %s\n", runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
	fmt.Fprintf(w, "workload: seed %d, %d envelopes (%d duplicates), %d expected outputs (%d keys + %d unkeyed), ~%.0f MiB of bodies from %s (%d bodies)\n",
		o.seed, st.Envelopes, st.Duplicates, st.Expected, st.KeyedUnique, st.Unkeyed, float64(st.BodyBytes)/(1<<20), wl.corpus.Origin, len(wl.corpus.Bodies))
	var parts []string
	for _, s := range sourceMix {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", s.id, 100*float64(st.BySource[s.id])/float64(st.Envelopes)))
	}
	fmt.Fprintf(w, "sources: %s; live: %d envelopes at %d/s; naive drain: %d envelopes\n", strings.Join(parts, ", "), o.liveN, o.rate, o.naiveN)
	fmt.Fprintln(w, o.inputRetention.reportLine())
	fmt.Fprintln(w, o.scaleOptions.reportLine())
}
