package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scServer is the scale run's nats-server: unlike the bench's Server it keeps its store and ports across a
// restart, so that a restart measures recovery of the same window.
type scServer struct {
	ps                     *procs
	bin, dir               string
	env                    []string
	port, monPort, profile int
	proc                   *Proc
	httpc                  *http.Client
}

func (s *scServer) url() string     { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }
func (s *scServer) monitor() string { return "http://127.0.0.1:" + strconv.Itoa(s.monPort) }

// newScServer picks the ports and starts the server; gomemlimit ("" for none) is the server's GOMEMLIMIT.
func newScServer(ctx context.Context, ps *procs, bin, dir, gomemlimit string) (*scServer, error) {
	s := &scServer{ps: ps, bin: bin, dir: dir, httpc: &http.Client{Timeout: 30 * time.Second}}
	for _, p := range []*int{&s.port, &s.monPort, &s.profile} {
		var err error
		if *p, err = freePort(); err != nil {
			return nil, err
		}
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			s.env = append(s.env, kv)
		}
	}
	if gomemlimit != "" {
		s.env = append(s.env, "GOMEMLIMIT="+gomemlimit)
	}
	if _, err := s.start(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return s, nil
}

// start runs the server on its store and returns how long it took until /healthz said the server and every
// stream were up (JetStream recovered).
func (s *scServer) start(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	args := []string{"-js", "-sd", s.dir, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-m", strconv.Itoa(s.monPort),
		"--profile", strconv.Itoa(s.profile)}
	t0 := time.Now()
	p, err := s.ps.start("nats-server", s.bin, args, s.env)
	if err != nil {
		return 0, err
	}
	s.proc = p
	for {
		resp, err := s.httpc.Get(s.monitor() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(t0), nil
			}
		}
		if ok, werr := p.Exited(); ok {
			return 0, fmt.Errorf("scale: nats-server exited (%v): %s", werr, p.log.String())
		}
		if time.Since(t0) > timeout {
			return 0, fmt.Errorf("scale: nats-server not healthy after %s: %s", timeout, p.log.String())
		}
		if err := scPause(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// stop ends the server with sig (SIGTERM: a clean shutdown; SIGKILL: a crash) and returns how long it took to
// exit. A SIGTERM that does not end it within grace is followed by SIGKILL, and that is an error.
func (s *scServer) stop(sig syscall.Signal, grace time.Duration) (time.Duration, error) {
	t0 := time.Now()
	_ = syscall.Kill(-s.proc.Pid(), sig)
	select {
	case <-s.proc.done:
		return time.Since(t0), nil
	case <-time.After(grace):
		_ = syscall.Kill(-s.proc.Pid(), syscall.SIGKILL)
		<-s.proc.done
		return time.Since(t0), fmt.Errorf("scale: nats-server did not stop within %s of %s: killed", grace, sig)
	}
}

// heap is the server's live heap (HeapAlloc right after a forced GC), from its pprof heap profile.
func (s *scServer) heap() (int64, error) {
	h, err := heapOf(s.httpc, "http://127.0.0.1:"+strconv.Itoa(s.profile))
	if err != nil {
		return 0, fmt.Errorf("scale: %w", err)
	}
	return h, nil
}

// settledHeap waits until the file store's caches have expired (10 s after their last access) and returns the
// lowest live heap sampled over settle.
func (s *scServer) settledHeap(ctx context.Context, settle time.Duration) (int64, error) {
	best := int64(-1)
	for t0 := time.Now(); ; {
		h, err := s.heap()
		if err != nil {
			return 0, err
		}
		if best < 0 || h < best {
			best = h
		}
		if time.Since(t0) > settle {
			return best, nil
		}
		// A forced collection of a heap of gigabytes costs the server a second of CPU: sample sparingly.
		if err := scPause(ctx, 3*time.Second); err != nil {
			return 0, err
		}
	}
}

// rss is the server's resident memory now.
func (s *scServer) rss() int64 {
	st, _ := readProcStat(s.proc.Pid())
	return st.RSS
}

// scWorker is the worker process: its HTTP address serves /metrics and /readyz.
type scWorker struct {
	proc *Proc
	http string
	hc   *http.Client
}

func startScWorker(ps *procs, bin, natsURL string, shards int) (*scWorker, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	env := scEnv(natsURL, shards)
	env = append(env, "DEDUPE_SOURCES="+scSourcesYAML, "DEDUPE_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"DEDUPE_LOG_LEVEL=warn", "DEDUPE_LOG_FORMAT=json")
	p, err := ps.start("dedupeworker", bin, []string{"run"}, env)
	if err != nil {
		return nil, err
	}
	return &scWorker{proc: p, http: "http://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Timeout: 5 * time.Second}}, nil
}

// scEnv is the environment of the worker and of the window commands: the bench's own without DEDUPE_*, plus
// the server and the number of shards.
func scEnv(natsURL string, shards int) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEDUPE_") {
			env = append(env, kv)
		}
	}
	return append(env, "DEDUPE_NATS_URL="+natsURL, "DEDUPE_WINDOW_SHARDS="+strconv.Itoa(shards))
}

// readiness is one answer of /readyz: ok, or the reason it gave.
func (w *scWorker) readiness() (bool, string) {
	resp, err := w.hc.Get(w.http + "/readyz")
	if err != nil {
		return false, "no answer: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(body))
}

// readyWatch polls /readyz until the worker is ready (again: with afterDown, only once it has said it is not),
// and records how long that took from t0 and every distinct reason it gave meanwhile (with when it first said
// it). afterDown is for a restart of the server: the watch starts before the worker can have noticed it.
type readyWatch struct {
	took    time.Duration
	reasons []string
}

func (w *scWorker) waitReady(ctx context.Context, t0 time.Time, timeout time.Duration, afterDown bool) (readyWatch, error) {
	var rw readyWatch
	seen := map[string]bool{}
	down := !afterDown
	for {
		if ok, err := w.proc.Exited(); ok {
			return rw, fmt.Errorf("scale: the worker exited (%v): %s", err, w.proc.log.String())
		}
		ok, why := w.readiness()
		if ok && down {
			rw.took = time.Since(t0)
			return rw, nil
		}
		down = down || !ok
		// The reason without its varying figures, so that one state is recorded once.
		if short := scState(why); !ok && !seen[short] {
			seen[short] = true
			rw.reasons = append(rw.reasons, fmt.Sprintf("+%.1fs %s", time.Since(t0).Seconds(), why))
		}
		if time.Since(t0) > timeout {
			return rw, fmt.Errorf("scale: the worker not ready %s after the restart: %s", timeout, why)
		}
		if err := scPause(ctx, 50*time.Millisecond); err != nil {
			return rw, err
		}
	}
}

// scFigure is a number with its unit, if any: "4.2s", "100ms", "17".
var scFigure = regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ns|µs|ms|s|m|h)?`)

// scState is a readiness reason without its figures: "RECONNECTING for 0s" and "for 100ms" are one state.
func scState(s string) string { return scFigure.ReplaceAllString(s, "#") }

// scShortReason is a reason cut to fit a table cell; the run's log keeps it whole.
func scShortReason(s string) string {
	const max = 120
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}

// metrics fetches the worker's /metrics text.
func (w *scWorker) metrics() (string, error) {
	return getMetrics(w.hc, w.http)
}

func (w *scWorker) rss() int64 {
	st, _ := readProcStat(w.proc.Pid())
	return st.RSS
}

// scPause waits d or until ctx ends.
func scPause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
