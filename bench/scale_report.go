package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// scReport is everything a scale run measured, printed as Markdown for BENCHMARKS.md.
type scReport struct {
	opts                    scOptions
	started                 time.Time
	chunks                  []scChunkResult
	baseHeap, baseRSS       int64
	settledHeap, settledRSS int64
	dupHeap, dupRSS         int64 // after the output stream's duplicate window (0: not measured)
	commands                []*scCommand
	restarts                []*scRestart
}

func (r *scReport) failed() bool {
	for _, c := range r.chunks {
		if !c.exact() {
			return true
		}
	}
	for _, c := range r.commands {
		if c.problem != "" {
			return true
		}
	}
	for _, rs := range r.restarts {
		if rs.problem != "" {
			return true
		}
	}
	return false
}

func scPerKey(b int64, keys uint64) string {
	if keys == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/float64(keys))
}

func (r *scReport) write(w io.Writer) {
	o := r.opts
	limit := "none"
	if o.gomemlimit != "" {
		limit = o.gomemlimit
	}
	fmt.Fprintf(w, "\n## dedupebench scale: %d envelopes, chunks of %d, %d shard(s)\n\n", o.n, o.chunk, o.shards)
	fmt.Fprintf(w, "started %s; %d CPUs, load %s; bodies %d B, %.0f %% retries (seed %d); nats-server GOMEMLIMIT: %s\n\n",
		r.started.Format(time.RFC3339), runtime.NumCPU(), loadAverage(), o.bodySize, o.retryRate*100, o.seed, limit)
	fmt.Fprintln(w, "Per-key figures of the server are above its heap and RSS before the first key.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| chunk | keys | drain env/s | claim p50 ms | claim p99 ms | server heap B/key | server RSS B/key | KV B/key | store on disk B/key | worker RSS MiB | outputs exact |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
	for i, c := range r.chunks {
		exact := "yes"
		if !c.exact() {
			exact = fmt.Sprintf("NO: %d outputs of %d, %d keys of %d, %d dead", c.outputs, c.expected, c.keys, c.windowKeysWant, c.dead)
		}
		fmt.Fprintf(w, "| %d | %d | %.0f | %s | %s | %.0f | %.0f | %.0f | %s | %s | %s |\n", i+1, c.keys,
			float64(c.envelopes)/c.seconds, ms(c.claimP50), ms(c.claimP99), c.heapPerKey, c.rssPerKey, c.kvPerKey(),
			scPerKey(c.diskBytes, c.keys), mib(c.workerRSS), exact)
	}
	if n := len(r.chunks); n > 0 {
		last := r.chunks[n-1]
		fmt.Fprintf(w, "\nserver heap right after the last drain: %s MiB (%.0f B/key); settled (caches expired, %s idle): %s MiB (%s B/key), "+
			"RSS then %s MiB (%s B/key)", mib(last.heap), last.heapPerKey, o.settle, mib(r.settledHeap),
			scPerKey(r.settledHeap-r.baseHeap, last.keys), mib(r.settledRSS), scPerKey(r.settledRSS-r.baseRSS, last.keys))
		if r.dupHeap > 0 {
			fmt.Fprintf(w, "; after the output's duplicate window (%s idle): heap %s MiB (%s B/key), RSS %s MiB (%s B/key)",
				o.settleDup, mib(r.dupHeap), scPerKey(r.dupHeap-r.baseHeap, last.keys), mib(r.dupRSS), scPerKey(r.dupRSS-r.baseRSS, last.keys))
		}
		fmt.Fprintf(w, "; before the first key: heap %s MiB, RSS %s MiB; KV messages %d for %d keys\n",
			mib(r.baseHeap), mib(r.baseRSS), last.kvMsgs, last.keys)
	}
	if len(r.commands) > 0 {
		result := func(c *scCommand) string {
			if c.problem != "" {
				return "FAILED: " + strings.ReplaceAll(c.problem, "|", "/")
			}
			return "ok"
		}
		if o.beforeBin == "" {
			fmt.Fprintln(w, "\n| window command | seconds | lines | result |")
			fmt.Fprintln(w, "|---|---:|---:|---|")
		} else {
			fmt.Fprintln(w, "\n| window command | seconds | lines | result | before: seconds | lines | result |")
			fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---|")
		}
		for _, c := range r.commands {
			fmt.Fprintf(w, "| `%s` | %.2f | %d | %s |", scArgs(c.args), c.seconds, c.lines, result(c))
			if b := c.before; b != nil {
				fmt.Fprintf(w, " %.2f | %d | %s |", b.seconds, b.lines, result(b))
			} else if o.beforeBin != "" {
				fmt.Fprint(w, " | | |")
			}
			fmt.Fprintln(w)
		}
	}
	if len(r.restarts) > 0 {
		fmt.Fprintln(w, "\n| restart | stop s | recovery s | worker ready s | server heap after MiB | server RSS after MiB | oldest retries collapsed | readiness said |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|---|")
		for _, rs := range r.restarts {
			res := fmt.Sprintf("yes (%d outputs of %d, probe drained in %.1fs)", rs.outputs, rs.want, rs.probeSeconds)
			if rs.problem != "" {
				res = "NO: " + rs.problem
			}
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n", rs.signal, rs.stop.Seconds(), rs.recovery.Seconds(),
				rs.ready.Seconds(), mib(rs.heap), mib(rs.rss), res, scReasons(rs.reasons))
		}
	}
	fmt.Fprintf(w, "\ncommand: go -C bench run . scale %s\n", r.flagLine())
}

// scReasons is the restart row's readiness cell: each reason shortened, in order.
func scReasons(reasons []string) string {
	short := make([]string, len(reasons))
	for i, r := range reasons {
		short[i] = scShortReason(r)
	}
	return strings.ReplaceAll(strings.Join(short, "; "), "|", "/")
}

// scArgs shortens long keys in a command line for the table.
func scArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 24 {
			a = a[:12] + "…"
		}
		out[i] = a
	}
	return "window " + strings.Join(out, " ")
}

func (r *scReport) flagLine() string {
	o := r.opts
	s := fmt.Sprintf("-n %d -chunk %d -shards %d -body %d -retries %g -seed %d", o.n, o.chunk, o.shards, o.bodySize, o.retryRate, o.seed)
	if o.gomemlimit != "" {
		s += " -server-gomemlimit " + o.gomemlimit
	}
	return s
}
