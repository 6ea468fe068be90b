package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Worker is one replica of dedupeworker: a real process, restartable, whose stderr (all incarnations) goes to a
// log file that is replayed into the test log when the test fails.
type Worker struct {
	t        *testing.T
	Name     string
	HTTPAddr string
	LogPath  string
	env      []string

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
	exitErr     error
	expectExit  bool // the current process is being killed or stopped by the test
	incarnation int
	Kills       int
	Freezes     int
	unexpected  []string // exits the test did not cause
}

// workerEnv is the environment of a worker: the test process's, minus every DEDUPE_* variable, plus vars.
func workerEnv(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEDUPE_") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// StartWorker starts a worker with the given DEDUPE_* variables (DEDUPE_HTTP_ADDR is set to a free loopback
// port unless given; logs are JSON). It is stopped when the test ends; crashes and panics fail the test.
func StartWorker(t *testing.T, name string, vars map[string]string) *Worker {
	t.Helper()
	v := map[string]string{
		"DEDUPE_LOG_FORMAT":       "json",
		"DEDUPE_LOG_LEVEL":        "info",
		"DEDUPE_SHUTDOWN_TIMEOUT": "10s",
	}
	for k, val := range vars {
		v[k] = val
	}
	if _, ok := v["DEDUPE_HTTP_ADDR"]; !ok {
		v["DEDUPE_HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	}
	w := &Worker{t: t, Name: name, HTTPAddr: v["DEDUPE_HTTP_ADDR"], env: workerEnv(v),
		LogPath: filepath.Join(t.TempDir(), name+".log")}
	w.Start()
	t.Cleanup(w.cleanup)
	return w
}

// Start starts a new incarnation (the previous one must have exited).
func (w *Worker) Start() {
	w.t.Helper()
	if err := w.start(); err != nil {
		w.t.Fatal(err)
	}
}

// start is Start for goroutines other than the test's.
func (w *Worker) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.incarnation++
	f, err := os.OpenFile(w.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("worker %s: log: %w", w.Name, err)
	}
	fmt.Fprintf(f, "=== %s incarnation %d started %s ===\n", w.Name, w.incarnation, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(workerBin, "run")
	cmd.Env = w.env
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group (a ^C to the test is not a kill), and SIGKILL if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("worker %s: start: %w", w.Name, err)
	}
	done := make(chan struct{})
	w.cmd, w.done, w.expectExit, w.exitErr = cmd, done, false, nil
	inc := w.incarnation
	go func() {
		err := cmd.Wait()
		f.Close()
		w.mu.Lock()
		w.exitErr = err
		if !w.expectExit {
			w.unexpected = append(w.unexpected, fmt.Sprintf("incarnation %d (pid %d) exited by itself: %v", inc, cmd.Process.Pid, err))
		}
		w.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid of the current incarnation.
func (w *Worker) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd.Process.Pid
}

// Running reports whether the current incarnation is alive.
func (w *Worker) Running() bool {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (w *Worker) Kill() {
	w.t.Helper()
	w.mu.Lock()
	w.expectExit = true
	cmd, done := w.cmd, w.done
	w.Kills++
	w.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		w.t.Errorf("worker %s: pid %d still running 10s after SIGKILL", w.Name, cmd.Process.Pid)
	}
}

// Freeze stops the process (SIGSTOP) for d, then lets it go on (SIGCONT): a replica that stalls longer than the
// ack wait and then wakes up with stale work in hand.
func (w *Worker) Freeze(d time.Duration) {
	w.mu.Lock()
	cmd := w.cmd
	w.Freezes++
	w.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	<-time.After(d) // the freeze's length is the fault itself
	_ = cmd.Process.Signal(syscall.SIGCONT)
}

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after timeout). It returns the exit error.
func (w *Worker) Stop(timeout time.Duration) error {
	w.mu.Lock()
	w.expectExit = true
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	select {
	case <-done:
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(timeout):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			return fmt.Errorf("worker %s: no exit %s after SIGTERM (killed)", w.Name, timeout)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitErr
}

// Unexpected lists the exits the test did not cause.
func (w *Worker) Unexpected() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.unexpected...)
}

// Log is the whole log file (every incarnation).
func (w *Worker) Log() string {
	b, _ := os.ReadFile(w.LogPath)
	return string(b)
}

var crashRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE|goroutine \d+ \[running\]:)`)

func (w *Worker) cleanup() {
	if w.Running() {
		if err := w.Stop(15 * time.Second); err != nil {
			w.t.Errorf("worker %s: graceful stop at the end of the test: %v", w.Name, err)
		}
	}
	for _, u := range w.Unexpected() {
		w.t.Errorf("worker %s: %s", w.Name, u)
	}
	log := w.Log()
	if m := crashRE.FindStringIndex(log); m != nil {
		w.t.Errorf("worker %s: crash in its log:\n%s", w.Name, excerpt(log[m[0]:], 6000))
	}
	if w.t.Failed() {
		w.t.Logf("worker %s log (%d incarnations, %s), last part:\n%s", w.Name, w.incarnation, w.LogPath, tail(log, 12000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n..."
}

// get fetches a path of the worker's HTTP server.
func (w *Worker) get(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.HTTPAddr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// WaitReady polls /readyz until it answers 200.
func (w *Worker) WaitReady(timeout time.Duration) {
	w.t.Helper()
	poll(w.t, timeout, func() (bool, string) {
		if !w.Running() {
			w.t.Fatalf("worker %s exited before being ready: %v\n%s", w.Name, w.exitErrLocked(), tail(w.Log(), 4000))
		}
		code, body, err := w.get("/readyz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("/readyz %d %s", code, strings.TrimSpace(body))
	})
}

func (w *Worker) exitErrLocked() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitErr
}

// Ready reports whether /readyz answers 200 right now.
func (w *Worker) Ready() bool {
	code, _, err := w.get("/readyz")
	return err == nil && code == http.StatusOK
}

// Metrics scrapes /metrics: every sample as "name{labels}" → value (labels as exposed, sorted by the exporter).
func (w *Worker) Metrics() (map[string]float64, error) {
	code, body, err := w.get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// label returns the value of label name in a sample key such as `x{source="gh",outcome="unique"}`.
func label(sample, name string) string {
	i := strings.Index(sample, name+`="`)
	if i < 0 {
		return ""
	}
	rest := sample[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// SumMetric adds every sample of metric grouped by one label.
func SumMetric(m map[string]float64, metric, by string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if k == metric || strings.HasPrefix(k, metric+"{") {
			out[label(k, by)] += v
		}
	}
	return out
}

// Memory reads VmRSS and VmHWM (peak RSS) of the current incarnation, in bytes.
func (w *Worker) Memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.Pid()))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// RunOnce runs the worker binary to completion (for the fail-fast checks) with a deadline.
func RunOnce(t *testing.T, vars map[string]string, timeout time.Duration) (exit int, stderr string, elapsed time.Duration) {
	t.Helper()
	if _, ok := vars["DEDUPE_HTTP_ADDR"]; !ok {
		vars["DEDUPE_HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin, "run")
	cmd.Env = workerEnv(vars)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	elapsed = time.Since(start)
	if ctx.Err() != nil {
		return -1, out.String(), elapsed
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), elapsed
	}
	if err != nil {
		t.Fatalf("run worker: %v", err)
	}
	return 0, out.String(), elapsed
}

// natsServerBin is a nats-server binary built from the module graph (github.com/nats-io/nats-server/v2), for the
// scenarios that must SIGKILL the server itself (an in-process server can only shut down cleanly).
var (
	natsServerOnce sync.Once
	natsServerBin  string
	natsServerErr  error
)

func buildNATSServer(t *testing.T) string {
	t.Helper()
	natsServerOnce.Do(func() {
		natsServerBin = filepath.Join(filepath.Dir(workerBin), "nats-server")
		out, err := exec.Command("go", "build", "-o", natsServerBin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			natsServerErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if natsServerErr != nil {
		t.Fatal(natsServerErr)
	}
	return natsServerBin
}

// ServerProc is a nats-server running as its own process (JetStream, file store), restartable on the same port
// and store after a SIGKILL.
type ServerProc struct {
	t       *testing.T
	Port    int
	Store   string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	Kills   int
}

// RunServerProc starts a nats-server process on a free loopback port; it is killed when the test ends.
func RunServerProc(t *testing.T) *ServerProc {
	t.Helper()
	dir := t.TempDir()
	s := &ServerProc{t: t, Port: natstest.FreePort(t), Store: filepath.Join(dir, "store"), LogPath: filepath.Join(dir, "nats-server.log")}
	s.Start()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(s.LogPath)
			t.Logf("nats-server log, last part:\n%s", tail(string(b), 6000))
		}
	})
	return s
}

// URL is the client URL.
func (s *ServerProc) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.Port) }

// Start starts the server and waits until JetStream answers.
func (s *ServerProc) Start() {
	s.t.Helper()
	f, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(buildNATSServer(s.t), "-a", "127.0.0.1", "-p", fmt.Sprint(s.Port), "-js", "-sd", s.Store, "-n", "killable")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(s.done) }()
	poll(s.t, 30*time.Second, func() (bool, string) {
		code, err := jetStreamUp(s.URL())
		if err != nil {
			return false, err.Error()
		}
		return code, "JetStream not up"
	})
}

// Kill SIGKILLs the server and waits for it to be gone.
func (s *ServerProc) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.Kills++
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}
