package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat (100 on every Linux this runs on).
const clockTicks = 100

// procs tracks every child process, so that all of them are killed on any exit path.
type procs struct {
	mu   sync.Mutex
	list []*Proc
}

// Proc is a started child process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *tailBuffer
}

// tailBuffer keeps the last bytes a process wrote (for error messages).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// start runs a binary in its own process group, killed with the bench should the bench die (Pdeathsig).
func (ps *procs) start(name, bin string, args, env []string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{}), log: tail}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop asks the process group to end (SIGTERM), and kills it after grace.
func (p *Proc) Stop(grace time.Duration) error {
	if ok, _ := p.Exited(); ok {
		return nil
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s: killed", p.Name, grace)
	}
}

// killAll kills every process still running; used on every exit path of run.
func (ps *procs) killAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for _, p := range list {
		if ok, _ := p.Exited(); !ok {
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
			<-p.done
		}
	}
}

// ProcStat is what /proc says about a process.
type ProcStat struct {
	RSS, HWM int64   // bytes: VmRSS, VmHWM (peak RSS)
	CPU      float64 // seconds of user+system CPU since start
}

// readProcStat reads /proc/<pid>/status (VmRSS, VmHWM) and /proc/<pid>/stat (utime, stime).
func readProcStat(pid int) (ProcStat, error) {
	var s ProcStat
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		for _, f := range []struct {
			name string
			dst  *int64
		}{{"VmRSS:", &s.RSS}, {"VmHWM:", &s.HWM}} {
			if rest, ok := strings.CutPrefix(line, f.name); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				*f.dst = kb << 10
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields after the last ')' are fixed.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, errors.New("unexpected /proc stat format")
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return s, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseFloat(fields[11], 64)
	st, _ := strconv.ParseFloat(fields[12], 64)
	s.CPU = (ut + st) / clockTicks
	return s, nil
}

// Sampler polls a process's RSS every interval and keeps the peak (VmHWM covers the whole life of the process;
// the sampler covers only the measured phase).
type Sampler struct {
	pid      int
	start    ProcStat
	mu       sync.Mutex
	peakRSS  int64
	last     ProcStat
	stop     chan struct{}
	finished chan struct{}
}

func startSampler(pid int, every time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), finished: make(chan struct{})}
	s.start, _ = readProcStat(pid)
	s.peakRSS, s.last = s.start.RSS, s.start
	go func() {
		defer close(s.finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *Sampler) sample() {
	st, err := readProcStat(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = st
	if st.RSS > s.peakRSS {
		s.peakRSS = st.RSS
	}
}

// Stop ends sampling and returns the peak RSS seen, VmHWM at the end, and the CPU seconds used meanwhile.
func (s *Sampler) Stop() (peakRSS, hwm int64, cpu float64) {
	close(s.stop)
	<-s.finished
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakRSS, s.last.HWM, s.last.CPU - s.start.CPU
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// productModule is the module path of the worker, which the bench builds and measures.
const productModule = "github.com/dedupeworker/dedupeworker"

// productRoot walks up from dir to the directory of the worker's go.mod (the bench's own module, bench/, lies
// below it): the worker and nats-server are built there, with the versions the worker's go.mod pins.
func productRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == productModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s at or above %s", productModule, dir)
		}
	}
}

// modulePath is the path a go.mod's module directive declares ("" when it has none).
func modulePath(gomod []byte) string {
	for _, l := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			rest, _, _ = strings.Cut(rest, "//")
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goBuild builds pkg in the module at root into out.
func goBuild(ctx context.Context, root, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// Server is a nats-server child process with JetStream, its own store, client port, monitor port and pprof
// port (for heap figures).
type Server struct {
	proc    *Proc
	dir     string
	URL     string
	monitor string // http://127.0.0.1:<m>
	profile string // http://127.0.0.1:<p>
	httpc   *http.Client
}

// startServer starts a fresh nats-server with a store in a new directory under tmp.
func startServer(ps *procs, bin, tmp string) (*Server, error) {
	dir, err := os.MkdirTemp(tmp, "store-")
	if err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "-m", strconv.Itoa(ports[1]),
		"--profile", strconv.Itoa(ports[2])}
	p, err := ps.start("nats-server", bin, args, os.Environ())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{proc: p, dir: dir, URL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0]),
		monitor: fmt.Sprintf("http://127.0.0.1:%d", ports[1]), profile: fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		httpc: &http.Client{Timeout: 10 * time.Second}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := s.httpc.Get(s.monitor + "/healthz?js-enabled-only=true")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if ok, werr := p.Exited(); ok {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nats-server exited (%v): %s", werr, p.log.String())
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("nats-server not healthy after 15s: %s", p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.proc.Pid() }

// Stop ends the server and removes its store.
func (s *Server) Stop() {
	_ = s.proc.Stop(10 * time.Second)
	_ = os.RemoveAll(s.dir)
}

// Varz returns /varz's mem (resident bytes, as the server sees it) and cpu (percent).
func (s *Server) Varz() (mem int64, err error) {
	var v struct {
		Mem int64 `json:"mem"`
	}
	if err := s.getJSON(s.monitor+"/varz", &v); err != nil {
		return 0, err
	}
	return v.Mem, nil
}

func (s *Server) getJSON(url string, v any) error {
	resp, err := s.httpc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Heap returns the server's live heap (HeapAlloc right after a forced GC), read from the runtime.MemStats
// block of its pprof heap profile (nats-server --profile).
func (s *Server) Heap() (int64, error) { return heapOf(s.httpc, s.profile) }

// heapOf reads HeapAlloc, right after a forced GC, from the pprof heap profile served at profile (a base URL).
func heapOf(httpc *http.Client, profile string) (int64, error) {
	resp, err := httpc.Get(profile + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	return 0, errors.New("no HeapAlloc in the server's heap profile")
}

// SettledHeap waits until the server's file-store caches have expired (they go 10s after the last access) and
// returns the live heap then: the lowest of samples taken over settle.
func (s *Server) SettledHeap(ctx context.Context, settle time.Duration) (int64, error) {
	deadline := time.Now().Add(settle)
	best := int64(-1)
	for {
		h, err := s.Heap()
		if err != nil {
			return 0, err
		}
		if best < 0 || h < best {
			best = h
		}
		if time.Now().After(deadline) {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// CPUProfile writes a CPU profile of the server of secs seconds to out.
func (s *Server) CPUProfile(out string, secs int) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return download(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.profile, secs), out, time.Duration(secs+30)*time.Second)
}

// download writes the body of a GET of url to the file out.
func download(url, out string, timeout time.Duration) error {
	resp, err := (&http.Client{Timeout: timeout}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
