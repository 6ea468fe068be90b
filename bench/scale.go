package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// "dedupebench scale" (make scale) fills a window to millions of keys through the real worker and nats-server,
// each in its own process, and measures what grows with the window; see BENCHMARKS.md, "A window of millions of
// keys". It is dispatched before main so that the bench's own flag set stays as it is.
func init() {
	if len(os.Args) < 2 || os.Args[1] != "scale" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runScale(ctx, os.Args[2:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "dedupebench scale:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type scOptions struct {
	n, chunk, shards, bodySize int
	retryRate                  float64
	seed                       uint64
	gomemlimit                 string
	serverBin, workerBin       string
	beforeBin                  string // an older dedupeworker: the read-only window commands run with it too
	settle, settleDup          time.Duration
	chunkTimeout               time.Duration
	probe                      int // retries of the oldest keys (and as many new events) after each restart
}

func parseScaleOptions(args []string, stderr io.Writer) (scOptions, error) {
	var o scOptions
	fs := flag.NewFlagSet("dedupebench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.n, "n", 5_000_000, "envelopes to publish (SCALE_N in make scale); keys = n less the retries")
	fs.IntVar(&o.chunk, "chunk", 500_000, "envelopes per chunk: each chunk is drained and measured on its own")
	fs.IntVar(&o.shards, "shards", 1, "DEDUPE_WINDOW_SHARDS (SCALE_SHARDS in make scale)")
	fs.IntVar(&o.bodySize, "body", 100, "body bytes of every envelope")
	fs.Float64Var(&o.retryRate, "retries", 0.05, "share of envelopes that repeat an event of their chunk")
	fs.Uint64Var(&o.seed, "seed", 1, "workload seed (same seed, same envelopes)")
	fs.StringVar(&o.gomemlimit, "server-gomemlimit", "", "GOMEMLIMIT of nats-server (e.g. 1GiB; default none)")
	fs.StringVar(&o.serverBin, "nats-server-bin", "", "nats-server binary (default: built from the module's nats-server)")
	fs.StringVar(&o.workerBin, "worker-bin", "", "dedupeworker binary (default: built from the worker's module, ./cmd/dedupeworker)")
	fs.StringVar(&o.beforeBin, "before-bin", "", "an older dedupeworker binary: the read-only window commands run with it too, for a before/after")
	fs.DurationVar(&o.settle, "settle", 15*time.Second, "idle time before the settled heap is read (the store's caches expire after 10s)")
	fs.DurationVar(&o.settleDup, "settle-dup", 2*time.Minute+15*time.Second,
		"idle time before the heap is read again, once the output stream's duplicate window (2m) has let go of the run's message ids (0: skip)")
	fs.DurationVar(&o.chunkTimeout, "chunk-timeout", 10*time.Minute, "longest one chunk may take to drain")
	fs.IntVar(&o.probe, "probe", 1000, "after each restart: retries of this many of the oldest events, and as many new events")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case o.n < 1 || o.chunk < 1:
		return o, fmt.Errorf("%w: -n and -chunk must be positive", errUsage)
	case o.shards < 1 || o.shards > maxShards:
		return o, fmt.Errorf("%w: -shards must be between 1 and %d, got %d", errUsage, maxShards, o.shards)
	case o.bodySize < 64:
		return o, fmt.Errorf("%w: -body must be at least 64 bytes (the JSON around the event number), got %d", errUsage, o.bodySize)
	case o.retryRate < 0 || o.retryRate >= 1:
		return o, fmt.Errorf("%w: -retries must be in [0, 1), got %g", errUsage, o.retryRate)
	case o.probe < 0:
		return o, fmt.Errorf("%w: -probe must not be negative", errUsage)
	}
	return o, nil
}

// scRun is one scale run's state.
type scRun struct {
	o      scOptions
	w      *scWorkload
	srv    *scServer
	worker *scWorker
	js     jetstream.JetStream
	log    io.Writer
	// expected is the number of outputs a correct worker has published so far.
	expected int
	// baseHeap and baseRSS are the server's before the first key: per-key figures are above them.
	baseHeap, baseRSS int64
	report            scReport
}

func (r *scRun) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseScaleOptions(args, stderr)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dedupebench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ps := &procs{}
	defer ps.killAll() // before the temp dir goes: no process keeps writing into it
	if err := scBinaries(ctx, &o, tmp); err != nil {
		return err
	}
	r := &scRun{o: o, log: stderr, w: planScale(o.n, o.chunk, o.bodySize, o.retryRate, o.seed)}
	r.report.opts = o
	r.report.started = time.Now().UTC()
	r.logf("plan: %d envelopes in %d chunks, %d unique events, %d shard(s)", o.n, len(r.w.chunks), r.w.events, o.shards)

	if r.srv, err = newScServer(ctx, ps, o.serverBin, filepath.Join(tmp, "store"), o.gomemlimit); err != nil {
		return err
	}
	nc, js, err := connect(r.srv.url(), "dedupebench-scale")
	if err != nil {
		return err
	}
	defer nc.Close()
	r.js = js
	if r.worker, err = startScWorker(ps, o.workerBin, r.srv.url(), o.shards); err != nil {
		return err
	}
	if _, err := r.worker.waitReady(ctx, time.Now(), time.Minute, false); err != nil {
		return err
	}
	if r.baseHeap, err = r.srv.heap(); err != nil {
		return fmt.Errorf("scale: server heap: %w", err)
	}
	r.baseRSS = r.srv.rss()
	r.report.baseHeap, r.report.baseRSS = r.baseHeap, r.baseRSS

	for i := range r.w.chunks {
		if err := r.runChunk(ctx, i); err != nil {
			return err
		}
	}
	if err := r.settle(ctx); err != nil {
		return err
	}
	if err := r.windowCommands(ctx); err != nil {
		return err
	}
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := r.restart(ctx, sig, i); err != nil {
			return err
		}
	}
	if err := r.forgetDense(ctx); err != nil {
		return err
	}
	r.report.write(stdout)
	if r.report.failed() {
		return errors.New("scale: a correctness check failed (see the report)")
	}
	return nil
}

// scBinaries builds nats-server and the worker into tmp unless given.
func scBinaries(ctx context.Context, o *scOptions, tmp string) error {
	wd, _ := os.Getwd()
	root, rootErr := productRoot(wd)
	for _, b := range []struct {
		path *string
		pkg  string
	}{{&o.serverBin, "github.com/nats-io/nats-server/v2"}, {&o.workerBin, "./cmd/dedupeworker"}} {
		if *b.path != "" {
			continue
		}
		if rootErr != nil {
			return fmt.Errorf("scale: building %s: %w (run from the repository or pass the binary)", b.pkg, rootErr)
		}
		*b.path = filepath.Join(tmp, filepath.Base(b.pkg))
		if err := goBuild(ctx, root, *b.path, b.pkg); err != nil {
			return err
		}
	}
	return nil
}

// windowStreams are the KV streams of the window's buckets.
func (r *scRun) windowStreams() []string {
	if r.o.shards == 1 {
		return []string{"KV_" + bucket}
	}
	out := make([]string, r.o.shards)
	for i := range out {
		out[i] = "KV_" + kvwindow.ShardBucket(bucket, r.o.shards, i)
	}
	return out
}

// windowState sums the window's buckets: keys (subjects), messages and bytes.
func (r *scRun) windowState(ctx context.Context) (keys, msgs, bytes uint64, err error) {
	for _, name := range r.windowStreams() {
		st, err := r.js.Stream(ctx, name)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("scale: stream %s: %w", name, err)
		}
		s := st.CachedInfo().State
		keys, msgs, bytes = keys+s.NumSubjects, msgs+s.Msgs, bytes+s.Bytes
	}
	return keys, msgs, bytes, nil
}
