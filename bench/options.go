package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
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
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "run the workers with DEDUPE_PPROF=true and write the CPU profile of the first worker drain to PATH, its allocation profile to PATH.allocs; "+
		"and the bench process's own profiles of the first floor drain: CPU to PATH.floor (floor's goroutines labelled contender=floor), allocations from the floor's start to the drain's end to PATH.floor.allocs")
	fs.StringVar(&o.serverProf, "server-cpuprofile", "", "write a CPU profile of the nats-server during each drain to PREFIX.<contender>.pprof (-profile-seconds long, from the contender's start)")
	fs.IntVar(&o.profileSeconds, "profile-seconds", 10, "length of the -cpuprofile and -server-cpuprofile CPU profiles (from the worker's HTTP start; from the contender's start); "+
		"the floor's PATH.floor stops at the drain's end if that comes first")
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
