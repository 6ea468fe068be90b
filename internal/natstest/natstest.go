// Package natstest starts real NATS servers with JetStream for tests: a single server (memory or file backed,
// restartable on the same port and store), a three-node cluster on loopback, and a cluster whose routes a test can
// cut as a network partition does (Partition). Nothing here mocks JetStream.
// Beside them are the few helpers every package's tests share: Eventually (poll a condition with a deadline, never
// sleep for it), FreePort and Buffer (a log that the code under test writes while the test reads it).
package natstest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is one running nats-server.
type Server struct {
	*server.Server
	Opts *server.Options
	tb   testing.TB
	log  *serverLog
}

// URL is the client URL of the server (stable across Restart).
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.Opts.Port) }

// Option adjusts the server options before start.
type Option func(*server.Options)

// WithOptions lets a test set anything else (TLS, users, nkeys, limits).
func WithOptions(f func(*server.Options)) Option { return Option(f) }

// Run starts a JetStream server on a free loopback port and stops it when the test ends.
func Run(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	o := options("test", FreePort(tb), tb.TempDir())
	for _, f := range opts {
		f(o)
	}
	s := newServer(tb, o)
	s.start()
	return s
}

// newServer is a server of options o, not started yet, that is stopped when the test ends; its warnings and errors,
// the shutdown's included, are shown then if the test failed.
func newServer(tb testing.TB, o *server.Options) *Server {
	s := &Server{Opts: o, tb: tb, log: &serverLog{}}
	tb.Cleanup(func() {
		s.Shutdown()
		s.log.report(tb, o.ServerName)
	})
	return s
}

// options are the options every test server starts from: JetStream on loopback, quiet.
func options(name string, port int, storeDir string) *server.Options {
	return &server.Options{ServerName: name, Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true}
}

func (s *Server) start() {
	s.tb.Helper()
	s.launch()
	s.ready()
}

// launch starts the server without waiting for it.
func (s *Server) launch() {
	s.tb.Helper()
	ns, err := server.NewServer(s.Opts.Clone())
	if err != nil {
		s.tb.Fatalf("natstest: %v", err)
	}
	ns.SetLoggerV2(s.log, false, false, false)
	s.Server = ns
	go ns.Start()
}

// ready waits until the server accepts connections, or it logs a fatal error (a port taken: the server then runs
// on without that listener). The bound is generous: under -race, with two test packages running on two shared
// cores, a node of a three-node cluster has taken more than 10 s to open its client port.
func (s *Server) ready() {
	s.tb.Helper()
	const bound = 30 * time.Second
	for deadline := time.Now().Add(bound); time.Now().Before(deadline) && s.log.fatal() == ""; {
		if s.ReadyForConnections(250 * time.Millisecond) {
			return
		}
	}
	running := s.Running()
	s.Server.Shutdown()
	if fatal := s.log.fatal(); fatal != "" {
		s.tb.Fatalf("natstest: server %s did not start%s", s.Opts.ServerName, fatal)
	}
	s.tb.Fatalf("natstest: server %s not ready after %s (running: %v)", s.Opts.ServerName, bound, running)
}

// up reports whether the server was started and is running.
func (s *Server) up() bool { return s.Server != nil && s.Running() }

// Shutdown stops the server and waits until it is down. Safe to call twice.
func (s *Server) Shutdown() {
	if s.Server == nil {
		return
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Restart stops the server and starts it again with the same port and store.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Shutdown()
	s.start()
}

// Connect opens a client connection that is closed when the test ends.
func Connect(tb testing.TB, url string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		tb.Fatalf("natstest: connect %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// FreePort returns a loopback TCP port that is free and reserved for tb until it ends: no other caller, in this
// process or another test process, is given it meanwhile. It is picked below the kernel's ephemeral range, which
// every outgoing connection draws from: a port picked there (as port 0 does) can be taken by a client or a
// route before the server listens on it, and the server then runs without its listener. nats-server's own
// cluster tests pick their route ports below that range too.
func FreePort(tb testing.TB) int {
	tb.Helper()
	lo, hi := pickRange()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		release, ok := reserve(p)
		if !ok {
			continue // another caller holds it
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			release()
			continue
		}
		_ = ln.Close()
		tb.Cleanup(release)
		return p
	}
	tb.Fatalf("natstest: no free port in %d-%d", lo, hi)
	return 0
}

// reserve holds port p for this process until release: an abstract unix socket (Linux only), which no other
// process can bind while it is open and which is gone with its process. Elsewhere nothing holds it.
func reserve(p int) (release func(), ok bool) {
	if runtime.GOOS != "linux" {
		return func() {}, true
	}
	hold, err := net.Listen("unix", "@natstest-port-"+strconv.Itoa(p))
	if err != nil {
		return nil, false
	}
	return func() { _ = hold.Close() }, true
}

// pickRange is the range FreePort picks from: below the ephemeral range (32768 unless the kernel says otherwise).
func pickRange() (lo, hi int) {
	hi = 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				hi = n
			}
		}
	}
	return 10000, hi
}

// Cluster is a JetStream cluster of nodes on loopback, each with the full route list.
type Cluster struct {
	Servers []*Server
	tb      testing.TB
}

// RunCluster starts an n-node JetStream cluster and waits for a meta leader with every peer known.
func RunCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return RunClusterWith(tb, n, nil)
}

// RunClusterWith is RunCluster with each node's options adjusted by opt (node i, from 0) before it starts: server
// tags for placement tests, limits.
func RunClusterWith(tb testing.TB, n int, opt func(i int, o *server.Options)) *Cluster {
	tb.Helper()
	clientPorts := make([]int, n)
	routePorts := make([]int, n)
	var routes []string
	for i := range n {
		clientPorts[i] = FreePort(tb)
		routePorts[i] = FreePort(tb)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	base := tb.TempDir()
	c := &Cluster{tb: tb}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		o := options(name, clientPorts[i], filepath.Join(base, name))
		o.Cluster = server.ClusterOpts{Name: "dedupe-test", Host: "127.0.0.1", Port: routePorts[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if opt != nil {
			opt(i, o)
		}
		c.Servers = append(c.Servers, newServer(tb, o))
	}
	// Start all nodes before waiting on any: a node is only "ready" for JetStream once it sees its peers.
	for _, s := range c.Servers {
		s.launch()
	}
	for _, s := range c.Servers {
		s.ready()
	}
	c.WaitMetaLeader(30 * time.Second)
	return c
}

// URLs is a comma-separated list of every node's client URL.
func (c *Cluster) URLs() string {
	var u []string
	for _, s := range c.Servers {
		u = append(u, s.URL())
	}
	return strings.Join(u, ",")
}

// WaitMetaLeader waits until a running node is the JetStream meta leader, it knows every peer, and every running
// node's meta layer is current.
func (c *Cluster) WaitMetaLeader(timeout time.Duration) *Server {
	c.tb.Helper()
	var leader *Server
	Eventually(c.tb, timeout, func() error {
		for _, s := range c.Servers {
			if !s.up() {
				continue
			}
			if s.JetStreamIsLeader() {
				if got := len(s.JetStreamClusterPeers()); got < c.running() {
					return fmt.Errorf("meta leader %s knows %d peers", s.Opts.ServerName, got)
				}
				leader = s
			}
		}
		if leader == nil {
			return fmt.Errorf("no meta leader")
		}
		// As nats-server's own cluster tests wait: a node whose meta layer is not current yet may leave a
		// client's API request unanswered for seconds.
		for _, s := range c.Servers {
			if s.up() && !s.JetStreamIsCurrent() {
				leader = nil
				return fmt.Errorf("%s: JetStream meta layer not current", s.Opts.ServerName)
			}
		}
		return nil
	})
	return leader
}

func (c *Cluster) running() int {
	return len(slices.DeleteFunc(slices.Clone(c.Servers), func(s *Server) bool { return !s.up() }))
}

// StreamLeader waits for and returns the node that leads stream in the global account.
func (c *Cluster) StreamLeader(stream string, timeout time.Duration) *Server {
	c.tb.Helper()
	var leader *Server
	Eventually(c.tb, timeout, func() error {
		for _, s := range c.Servers {
			if s.up() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				leader = s
				return nil
			}
		}
		return fmt.Errorf("no leader for stream %s", stream)
	})
	return leader
}

// Eventually polls cond until it returns nil or the deadline passes, then fails the test with the last error.
func Eventually(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: condition not met after %s: %v", timeout, err)
		}
		time.Sleep(wait) // polling interval, not a wait for a condition
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// Buffer is a bytes.Buffer that a process under test (its logger, say) may write while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
