package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var errUsage = errors.New("usage error")

type options struct {
	n, rate, liveN, naiveN   int
	repeat                   int
	liveSeconds              float64
	seed                     uint64
	quick, rssCheck          bool
	corpus                   string
	contenders, modes        []string
	maxInFlight, floorFlight int
	cpuprofile, serverProf   string
	profileSeconds           int
	settle, timeout, stall   time.Duration
	workerBin, serverBin     string
	inputRetention           inputRetention
	scaleOptions             // -shards, -scaling, -scaling-shards (scaling.go)
	ingestOptions            // -ingest, -ingest-n, -ingest-clients (ingest.go)
}

var allContenders = []string{cFloor, cNative, cWorker, cNaive, cWorker2}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("dedupebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: dedupebench [flags]\n\nBenchmarks dedupeworker against floor, naive and native (JetStream's own dedupe) on one workload.\n\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.n, "n", 200_000, "envelopes in the drain workload (quick: 20,000)")
	seed := fs.Uint64("seed", 1, "workload seed")
	fs.IntVar(&o.rate, "rate", 2000, "live mode: envelopes published per second")
	fs.Float64Var(&o.liveSeconds, "live-seconds", 30, "live mode: seconds of publishing (quick: 4)")
	fs.IntVar(&o.liveN, "live-n", 0, "live mode: envelopes (0: rate × live-seconds, at most -n)")
	fs.IntVar(&o.repeat, "repeat", 1, "drain rounds (each contender once per round, in turn); the median run of each is reported")
	fs.IntVar(&o.naiveN, "naive-n", 0, "naive drain: envelopes (a prefix of the workload; 0: all; quick: 5,000)")
	fs.BoolVar(&o.quick, "quick", false, "a run of under a minute: fewer envelopes, shorter live phase, no RSS check")
	fs.BoolVar(&o.rssCheck, "rss-check", false, "run the worker drain at 50k and 200k envelopes and compare peak RSS (always on without -quick)")
	fs.StringVar(&o.corpus, "corpus", "", "directory of webhook bodies (*.json); default ../shared/corpus/github when present, else generated")
	contenders := fs.String("contenders", strings.Join(allContenders, ","), "contenders to run (floor, naive, native, worker, worker2)")
	modes := fs.String("modes", "drain,live", "modes to run (drain, live, ingest); live runs floor and worker; ingest: the receiver comparison (ingest.go)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 0, "DEDUPE_MAX_IN_FLIGHT for the worker (0: the worker's default)")
	fs.IntVar(&o.floorFlight, "floor-in-flight", 4096, "envelopes floor keeps in flight")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "run the workers with DEDUPE_PPROF=true and write the CPU profile of the first worker drain to PATH, its allocation profile to PATH.allocs")
	fs.StringVar(&o.serverProf, "server-cpuprofile", "", "write a CPU profile of the nats-server during each drain to PREFIX.<contender>.pprof (-profile-seconds long, from the contender's start)")
	fs.IntVar(&o.profileSeconds, "profile-seconds", 10, "length of the -cpuprofile and -server-cpuprofile CPU profiles (from the worker's HTTP start; from the contender's start)")
	fs.DurationVar(&o.settle, "settle", 0, "wait before reading the server's heap after a run: file-store caches expire after 10s, "+
		"DEDUPED's message ids after its 2m duplicate window (0: 130s; quick: 11s, which leaves DEDUPED's ids in the kv figure)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "longest a single run may take")
	fs.DurationVar(&o.stall, "stall", 60*time.Second, "fail a run that makes no progress for this long")
	fs.StringVar(&o.workerBin, "worker-bin", "", "use this dedupeworker binary instead of building ./cmd/dedupeworker")
	fs.StringVar(&o.serverBin, "nats-server-bin", "", "use this nats-server binary instead of building it from the module")
	fs.Var(&o.inputRetention, "input-retention", retentionUsage)
	o.scaleOptions.register(fs)
	o.ingestOptions.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, flag.ErrHelp
		}
		return o, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dedupebench: unexpected argument %q\n", fs.Arg(0))
		return o, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.seed = *seed
	if o.settle == 0 {
		o.settle = 130 * time.Second
		if o.quick {
			o.settle = 11 * time.Second
		}
	}
	if o.quick {
		if !set["n"] {
			o.n = 20_000
		}
		if !set["live-seconds"] {
			o.liveSeconds = 4
		}
		if !set["naive-n"] {
			o.naiveN = 5_000
		}
	} else if !set["rss-check"] {
		o.rssCheck = true
	}
	o.contenders = splitList(*contenders)
	o.modes = splitList(*modes)
	o.scaleDefaults(set)
	if err := o.ingestDefaults(set, stderr); err != nil {
		return o, err
	}
	for _, c := range o.contenders {
		if !slices.Contains(allContenders, c) {
			fmt.Fprintf(stderr, "dedupebench: -contenders: unknown contender %q\n", c)
			return o, errUsage
		}
	}
	for _, m := range o.modes {
		if m != "drain" && m != "live" && m != modeIngest {
			fmt.Fprintf(stderr, "dedupebench: -modes: unknown mode %q\n", m)
			return o, errUsage
		}
	}
	if o.n < 100 || o.rate < 1 || o.repeat < 1 || o.floorFlight < 1 || o.maxInFlight < 0 {
		fmt.Fprintln(stderr, "dedupebench: -n must be at least 100; -rate and -floor-in-flight positive")
		return o, errUsage
	}
	if o.liveN == 0 {
		o.liveN = min(o.n, int(float64(o.rate)*o.liveSeconds))
	}
	if o.naiveN == 0 || o.naiveN > o.n {
		o.naiveN = o.n
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

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

	results  []*Result
	profiled bool // the worker drain with -cpuprofile has run
	scale    scaleState
	ingest   ingestState
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
	root, rootErr := moduleRoot(wd)
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
		// Rounds of every contender in turn, so that a burst of load from elsewhere on the machine hits all of
		// them alike; each contender's median-rate run is reported. Heap-measured runs come first in round one:
		// their settling overlaps the later runs.
		runs := map[string][]*Result{}
		for round := 0; round < opts.repeat; round++ {
			for _, c := range allContenders {
				if !b.has(c) {
					continue
				}
				wl := w
				if c == cNaive {
					wl = w.Prefix(opts.naiveN)
				}
				heap := round == 0 && (c == cFloor || c == cNative || c == cWorker)
				r, err := b.drain(ctx, c, c, wl, drainOpts{heap: heap})
				if err != nil {
					return err
				}
				runs[c] = append(runs[c], r)
			}
			if err := b.scalingRound(ctx, w, round); err != nil {
				return err
			}
		}
		for _, c := range allContenders {
			rs := runs[c]
			if len(rs) == 0 {
				continue
			}
			med := medianRun(rs)
			_ = add(med, nil)
			if len(rs) > 1 {
				rates := make([]string, len(rs))
				for i, r := range rs {
					rates[i] = fmt.Sprintf("%.0f", r.Rate())
					if r.Mismatch() && r != med {
						b.results = append(b.results, r) // a wrong count is never hidden by the median
					}
				}
				b.note("%s drain: env/s over %d rounds: %s (the median run is in the table)", c, len(rs), strings.Join(rates, ", "))
			}
		}
		if ws := runs[cWorker]; len(ws) > 1 {
			for _, c := range []string{cFloor, cNaive, cNative} {
				if others := runs[c]; len(others) == len(ws) {
					ratios := make([]string, len(ws))
					for i := range ws {
						ratios[i] = fmt.Sprintf("%.2f", ws[i].Rate()/others[i].Rate())
					}
					b.note("worker/%s drain throughput round by round: %s", c, strings.Join(ratios, ", "))
				}
			}
		}
	}
	if opts.cpuprofile != "" && !b.profiled {
		b.note("cpuprofile: no worker drain ran (-contenders worker, -modes drain): no profile written")
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
	if err := writeSummary(stdout, summarize(results)); err != nil {
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

// instance is a running contender.
type instance struct {
	check   func() error // non-nil once the contender failed or stopped by itself
	stop    func() error
	workers []*workerReplica
}

func (b *bench) startContender(ctx context.Context, kind, url string, w *Workload) (*instance, error) {
	switch contenderClass(kind) {
	case cFloor, cNaive:
		fn := naiveContender(b.opts.shards.k())
		if kind == cFloor {
			fn = floorContender(b.opts.floorFlight, b.opts.shards.k())
		}
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- fn(cctx, url, w) }()
		var once sync.Once
		var ended error
		var gotEnd atomic.Bool
		wait := func(block bool) (error, bool) {
			if gotEnd.Load() {
				return ended, true
			}
			if block {
				ended = <-errc
			} else {
				select {
				case ended = <-errc:
				default:
					return nil, false
				}
			}
			gotEnd.Store(true)
			return ended, true
		}
		return &instance{
			check: func() error {
				if err, done := wait(false); done {
					if err == nil {
						err = errors.New("returned early")
					}
					return fmt.Errorf("%s: %w", kind, err)
				}
				return nil
			},
			stop: func() error {
				var err error
				once.Do(func() { cancel(); err, _ = wait(true) })
				return err
			},
		}, nil
	case cWorker, cWorker2:
		reps, err := startWorkers(b.ps, b.workerSpec(kind), url)
		inst := &instance{workers: reps}
		inst.stop = func() error {
			var errs []error
			for _, r := range reps {
				if err := r.proc.Stop(30 * time.Second); err != nil {
					errs = append(errs, err)
				}
				if ok, werr := r.proc.Exited(); ok && werr != nil {
					errs = append(errs, fmt.Errorf("%s exited: %v", r.proc.Name, werr))
				}
			}
			return errors.Join(errs...)
		}
		inst.check = func() error {
			for _, r := range reps {
				if ok, err := r.proc.Exited(); ok {
					return fmt.Errorf("%s exited (%v):\n%s", r.proc.Name, err, r.proc.log.String())
				}
			}
			return nil
		}
		if err != nil {
			_ = inst.stop()
			return nil, err
		}
		return inst, nil
	}
	return nil, fmt.Errorf("unknown contender %q", kind)
}

func streamMsgs(ctx context.Context, js jetstream.JetStream, name string) (int, bool) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return 0, false
	}
	return int(st.CachedInfo().State.Msgs), true
}

// waitDrained polls the shared consumer until every envelope up to lastSeq is delivered and acknowledged.
func (b *bench) waitDrained(ctx context.Context, js jetstream.JetStream, lastSeq uint64, check func() error, firstAck *time.Time) (time.Time, error) {
	deadline := time.Now().Add(b.opts.timeout)
	var floor uint64
	lastProgress := time.Now()
	for {
		if err := check(); err != nil {
			return time.Time{}, err
		}
		c, err := js.Consumer(ctx, inputStream, consumerName)
		if err == nil {
			ci := c.CachedInfo()
			if firstAck.IsZero() && ci.AckFloor.Stream > 0 {
				*firstAck = time.Now()
			}
			if ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Stream >= lastSeq {
				return time.Now(), nil
			}
			if ci.AckFloor.Stream != floor || ci.Delivered.Stream == 0 {
				floor = ci.AckFloor.Stream
				lastProgress = time.Now()
			}
			if time.Since(lastProgress) > b.opts.stall {
				return time.Time{}, fmt.Errorf("no progress for %s: ack floor %d of %d, %d pending, %d awaiting ack, %d redelivered",
					b.opts.stall, ci.AckFloor.Stream, lastSeq, ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
			}
		} else if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("not drained after %s", b.opts.timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// drain runs one contender against a fresh server preloaded with the workload (native: publishes it) and
// measures the time to empty it.
// drainOpts are the extras of one drain run.
type drainOpts struct {
	heap bool // measure the server's heap before and (settled) after
}

func (b *bench) drain(ctx context.Context, label, kind string, w *Workload, o drainOpts) (*Result, error) {
	heap := o.heap
	n := len(w.Envelopes)
	res := &Result{Contender: label, Mode: "drain", Envelopes: n, Expected: w.Expected()}
	srv, err := startServer(b.ps, b.serverBin, b.tmp)
	if err != nil {
		return nil, err
	}
	keepServer := false
	defer func() {
		if !keepServer {
			srv.Stop()
		}
	}()
	nc, js, err := connect(srv.URL, "bench-control")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	native := kind == cNative
	inProc := kind == cFloor || kind == cNaive
	var dupWindow time.Duration
	if native {
		dupWindow = windowTTL
	}
	if err := createInput(ctx, js, dupWindow, b.opts.inputRetention); err != nil {
		return nil, err
	}
	if inProc {
		if err := createClientSide(ctx, js, max(b.opts.floorFlight*2, 1000), b.opts.shards.k()); err != nil {
			return nil, err
		}
	}
	if heap {
		if res.HeapBefore, err = srv.Heap(); err != nil {
			return nil, fmt.Errorf("server heap: %w", err)
		}
	}
	if !native {
		t := time.Now()
		if _, err := publishAll(ctx, js, w, 0, n, nil); err != nil {
			return nil, fmt.Errorf("preload: %w", err)
		}
		d := time.Since(t)
		b.logf("%s drain: preloaded %d envelopes in %.1fs (%.0f/s)", label, n, d.Seconds(), float64(n)/d.Seconds())
	}
	srvS := startSampler(srv.Pid(), 100*time.Millisecond)
	selfS := startSampler(os.Getpid(), 250*time.Millisecond)
	t0 := time.Now()
	var end time.Time
	var inst *instance
	var profDone chan struct{}
	var srvProfDone chan struct{}
	if b.opts.serverProf != "" {
		srvProfDone = make(chan struct{})
		go func() {
			defer close(srvProfDone)
			out := fmt.Sprintf("%s.%s.pprof", b.opts.serverProf, strings.NewReplacer("+", "-", "@", "-").Replace(label))
			if err := srv.CPUProfile(out, b.opts.profileSeconds); err != nil {
				b.note("server-cpuprofile: %s: %v", label, err)
			}
		}()
	}
	if native {
		dups, err := publishAll(ctx, js, w, 0, n, w.IdempotencyKey)
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		end = time.Now()
		b.logf("%s drain: %d of %d publishes acknowledged as duplicates", label, dups, n)
	} else {
		inst, err = b.startContender(ctx, kind, srv.URL, w)
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		defer inst.stop()
		if kind == cWorker && label == cWorker && b.opts.cpuprofile != "" && !b.profiled {
			b.profiled = true
			profDone = make(chan struct{})
			go func() { defer close(profDone); b.profileWorker(ctx, inst.workers[0].http, label) }()
		}
		var firstAck time.Time
		end, err = b.waitDrained(ctx, js, uint64(n), inst.check, &firstAck)
		if !firstAck.IsZero() {
			res.FirstAck = firstAck.Sub(t0).Seconds()
		}
		if err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, fmt.Errorf("%s drain: %w", label, err)
		}
	}
	res.Seconds = end.Sub(t0).Seconds()
	res.ServerRSS, _, res.ServerCPU = srvS.Stop()
	_, _, clientCPU := selfS.Stop()
	if inProc || native {
		res.ClientCPU = clientCPU
	}
	if inst != nil {
		for _, r := range inst.workers {
			st, _ := readProcStat(r.proc.Pid())
			res.WorkerRSS = append(res.WorkerRSS, st.HWM)
			res.WorkerCPU = append(res.WorkerCPU, st.CPU)
		}
	}
	if native {
		res.Outputs, _ = streamMsgs(ctx, js, inputStream)
		res.WindowKeys = w.KeyedUnique()
	} else {
		time.Sleep(100 * time.Millisecond) // a late duplicate output would show up now
		res.Outputs, _ = streamMsgs(ctx, js, outputStream)
		if res.WindowKeys, err = b.windowKeys(ctx, js, kind); err != nil {
			return nil, fmt.Errorf("%s drain: %w", label, err)
		}
		if dlq, ok := streamMsgs(ctx, js, dlqStream); ok && dlq > 0 {
			res.DLQ = dlq
			b.note("%s drain: %d dead letters in %s", label, dlq, dlqStream)
		}
	}
	if profDone != nil {
		<-profDone
	}
	if srvProfDone != nil {
		<-srvProfDone
	}
	if inst != nil {
		if err := inst.stop(); err != nil {
			b.note("%s drain: stopping: %v", label, err)
		}
		for _, r := range inst.workers {
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(r.proc.log.String()), "\n") {
				// The one warning every run has: the unkeyed source is declared without dedupe on purpose.
				if l != "" && !strings.Contains(l, "source declares no dedupe") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				b.note("%s drain: %s logged %d line(s) at warn or above; last: %s", label, r.proc.Name, len(lines), lines[len(lines)-1])
			}
		}
	}
	b.logf("%s drain: %d envelopes in %.2fs (%.0f/s), %d outputs (expected %d)", label, n, res.Seconds, res.Rate(), res.Outputs, res.Expected)
	if heap {
		keepServer = true
		b.deferred.Add(1)
		go func() {
			defer b.deferred.Done()
			defer srv.Stop()
			select {
			case <-ctx.Done():
				return
			case <-time.After(b.opts.settle):
			}
			h, err := srv.SettledHeap(ctx, time.Second)
			if err != nil {
				b.note("%s drain: server heap after: %v", label, err)
				return
			}
			res.HeapAfter = h
		}()
	}
	return res, nil
}

// profileWorker fetches a CPU profile of -profile-seconds, then the allocation profile, from the /debug/pprof/
// a worker started with DEDUPE_PPROF=true serves on its DEDUPE_HTTP_ADDR (base: http://host:port).
func (b *bench) profileWorker(ctx context.Context, base, label string) {
	secs := b.opts.profileSeconds
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(base + "/debug/pprof/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			b.note("cpuprofile: %s: GET %s/debug/pprof/: %s (a worker without DEDUPE_PPROF?)", label, base, resp.Status)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.note("cpuprofile: %s: no HTTP server at %s: %v", label, base, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	get := func(path, out string, timeout time.Duration) error {
		return download(base+path, out, timeout)
	}
	path := b.opts.cpuprofile
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.note("cpuprofile: %v", err)
		return
	}
	if err := get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), path, time.Duration(secs+30)*time.Second); err != nil {
		b.note("cpuprofile: %s: %v", label, err)
		return
	}
	if err := get("/debug/pprof/allocs", path+".allocs", 30*time.Second); err != nil {
		b.note("cpuprofile: %s: allocs: %v", label, err)
		return
	}
	b.note("cpuprofile: %s: worker CPU profile (%ds from the start of its first drain) in %s, allocation profile in %s.allocs", label, secs, path, path)
}

// live publishes the workload at a fixed rate with the publish time stamped in Bench-Sent-At, and records when
// each output arrives on a core subscription to deduped.>.
func (b *bench) live(ctx context.Context, kind string, w *Workload) (*Result, error) {
	n := len(w.Envelopes)
	res := &Result{Contender: kind, Mode: "live", Envelopes: n, Expected: w.Expected()}
	srv, err := startServer(b.ps, b.serverBin, b.tmp)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	nc, js, err := connect(srv.URL, "bench-control")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if err := createInput(ctx, js, 0, b.opts.inputRetention); err != nil {
		return nil, err
	}
	inProc := kind == cFloor || kind == cNaive
	if inProc {
		if err := createClientSide(ctx, js, max(b.opts.floorFlight*2, 1000), b.opts.shards.k()); err != nil {
			return nil, err
		}
	}
	// Receiving side: its own connection, no pending limits (a slow consumer would drop outputs).
	rnc, err := nats.Connect(srv.URL, nats.Name("bench-receive"))
	if err != nil {
		return nil, err
	}
	defer rnc.Close()
	sent := make([]atomic.Int64, n) // fallback when an output lacks Bench-Sent-At: the send time by Bench-Index
	var latMu sync.Mutex
	lat := make([]time.Duration, 0, res.Expected)
	var received, unstamped atomic.Int64
	var lastArrival atomic.Int64
	sub, err := rnc.Subscribe("deduped.>", func(m *nats.Msg) {
		now := time.Now().UnixNano()
		at, err := strconv.ParseInt(m.Header.Get(hdrSentAt), 10, 64)
		if err != nil {
			if i, ierr := strconv.Atoi(m.Header.Get(hdrIndex)); ierr == nil && i >= 0 && i < n {
				at, err = sent[i].Load(), nil
			}
		}
		if err == nil && at > 0 {
			latMu.Lock()
			lat = append(lat, time.Duration(now-at))
			latMu.Unlock()
		} else {
			unstamped.Add(1)
		}
		lastArrival.Store(now)
		received.Add(1)
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := rnc.Flush(); err != nil {
		return nil, err
	}
	inst, err := b.startContender(ctx, kind, srv.URL, w)
	if err != nil {
		return nil, err
	}
	defer inst.stop()
	if len(inst.workers) > 0 {
		if err := waitReady(ctx, inst.workers, 30*time.Second); err != nil {
			return nil, err
		}
	}
	pnc, pjs, err := connect(srv.URL, "bench-ingest")
	if err != nil {
		return nil, err
	}
	defer pnc.Close()
	srvS := startSampler(srv.Pid(), 100*time.Millisecond)
	selfS := startSampler(os.Getpid(), 250*time.Millisecond)
	period := time.Second / time.Duration(b.opts.rate)
	t0 := time.Now()
	var pubErrs atomic.Int64
	for i := 0; i < n; i++ {
		if d := time.Until(t0.Add(time.Duration(i) * period)); d > 0 {
			time.Sleep(d)
		}
		if i%512 == 0 {
			if err := inst.check(); err != nil {
				srvS.Stop()
				selfS.Stop()
				return nil, err
			}
			if ctx.Err() != nil {
				srvS.Stop()
				selfS.Stop()
				return nil, ctx.Err()
			}
		}
		m := w.Msg(i)
		now := time.Now().UnixNano()
		m.Header.Set(hdrSentAt, strconv.FormatInt(now, 10))
		sent[i].Store(now)
		f, err := pjs.PublishMsgAsync(m)
		if err != nil {
			pubErrs.Add(1)
			continue
		}
		go func() {
			select {
			case <-f.Ok():
			case <-f.Err():
				pubErrs.Add(1)
			}
		}()
	}
	pubEnd := time.Now()
	select {
	case <-pjs.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
	}
	// Wait for every output, or until none arrived for 10s.
	lastCount, lastChange := received.Load(), time.Now()
	for received.Load() < int64(res.Expected) {
		if err := inst.check(); err != nil {
			srvS.Stop()
			selfS.Stop()
			return nil, err
		}
		if c := received.Load(); c != lastCount {
			lastCount, lastChange = c, time.Now()
		}
		if time.Since(lastChange) > 10*time.Second {
			b.note("%s live: outputs stopped at %d of %d expected", kind, lastCount, res.Expected)
			break
		}
		select {
		case <-ctx.Done():
			srvS.Stop()
			selfS.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	res.ServerRSS, _, res.ServerCPU = srvS.Stop()
	_, _, clientCPU := selfS.Stop()
	if inProc {
		res.ClientCPU = clientCPU
	}
	for _, r := range inst.workers {
		st, _ := readProcStat(r.proc.Pid())
		res.WorkerRSS = append(res.WorkerRSS, st.HWM)
		res.WorkerCPU = append(res.WorkerCPU, st.CPU)
	}
	end := time.Unix(0, lastArrival.Load())
	if end.Before(pubEnd) {
		end = pubEnd
	}
	res.Seconds = end.Sub(t0).Seconds()
	time.Sleep(100 * time.Millisecond)
	if err := sub.Drain(); err != nil {
		return nil, err
	}
	for sub.IsValid() {
		time.Sleep(10 * time.Millisecond)
	}
	res.Received = int(received.Load())
	latMu.Lock()
	l := summarizeLatency(lat)
	latMu.Unlock()
	res.Latency = &l
	res.Outputs, _ = streamMsgs(ctx, js, outputStream)
	if u := unstamped.Load(); u > 0 {
		b.note("%s live: %d outputs carried neither %s nor %s: no latency for them", kind, u, hdrSentAt, hdrIndex)
	}
	if pe := pubErrs.Load(); pe > 0 {
		b.note("%s live: %d publishes to %s failed", kind, pe, inputStream)
	}
	if res.Received != res.Outputs {
		b.note("%s live: %d outputs seen on deduped.>, %d stored in %s", kind, res.Received, res.Outputs, outputStream)
	}
	if err := inst.stop(); err != nil {
		b.note("%s live: stopping: %v", kind, err)
	}
	b.logf("%s live: %d envelopes at %d/s: p50 %s p99 %s max %s ms, %d outputs (expected %d)", kind, n, b.opts.rate,
		ms(l.P50), ms(l.P99), ms(l.Max), res.Outputs, res.Expected)
	return res, nil
}
