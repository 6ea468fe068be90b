package natstest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Partition is a cluster whose routes pass through proxies the test can cut, as a network partition cuts them:
// Isolate(i) closes every route connection of node i and refuses new ones until Heal(i). Clients keep reaching every
// node. Each node advertises its proxy as its route address, so that routes learned by gossip pass through the
// proxies too; a proxy tells which node opened a route by the server id in its CONNECT line.
type Partition struct {
	*Cluster
	mu       sync.Mutex
	isolated map[int]bool
	conns    map[*routeConn]struct{}
	ids      map[string]int // server id → node index
}

type routeConn struct {
	from       string // the id of the server that opened the route ("" until its CONNECT line is read)
	to         int    // node index
	client, up net.Conn
}

func (r *routeConn) close() {
	_ = r.client.Close()
	_ = r.up.Close()
}

// RunPartition starts an n-node JetStream cluster with cuttable routes and waits for its meta leader.
func RunPartition(tb testing.TB, n int) *Partition {
	tb.Helper()
	p := &Partition{isolated: map[int]bool{}, conns: map[*routeConn]struct{}{}, ids: map[string]int{}}
	proxies := make([]net.Listener, n)
	routePorts := make([]int, n)
	var routes []string
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("natstest: route proxy: %v", err)
		}
		proxies[i] = ln
		routePorts[i] = FreePort(tb)
		routes = append(routes, "nats://"+ln.Addr().String())
	}
	tb.Cleanup(func() {
		for _, ln := range proxies {
			_ = ln.Close()
		}
		p.mu.Lock()
		for c := range p.conns {
			c.close()
		}
		p.mu.Unlock()
	})
	for i, ln := range proxies {
		go p.serve(i, ln, routePorts[i])
	}
	p.Cluster = RunClusterWith(tb, n, func(i int, o *server.Options) {
		o.Cluster.Port = routePorts[i]
		o.Cluster.Advertise = proxies[i].Addr().String()
		o.Cluster.Compression.Mode = server.CompressionOff // the proxy reads the CONNECT line in the clear
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
	})
	p.mu.Lock()
	for i, s := range p.Servers {
		p.ids[s.ID()] = i
	}
	p.mu.Unlock()
	return p
}

// serve forwards route connections to node i's route port.
func (p *Partition) serve(i int, ln net.Listener, port int) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.forward(i, c, port)
	}
}

func (p *Partition) forward(to int, client net.Conn, port int) {
	up, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		_ = client.Close()
		return
	}
	rc := &routeConn{to: to, client: client, up: up}
	if !p.track(rc) {
		return
	}
	go func() { _, _ = io.Copy(client, up); rc.close() }()
	// The node that opened the route names itself in its first line: CONNECT {"name":"<server id>",...}.
	br := bufio.NewReader(client)
	line, err := br.ReadString('\n')
	if err != nil {
		rc.close()
		return
	}
	var connect struct {
		Name string `json:"name"`
	}
	if js, ok := strings.CutPrefix(strings.TrimSpace(line), "CONNECT "); ok {
		_ = json.Unmarshal([]byte(js), &connect)
	}
	p.mu.Lock()
	rc.from = connect.Name
	cut := p.cutLocked(rc)
	p.mu.Unlock()
	if cut {
		rc.close()
		return
	}
	if _, err := up.Write([]byte(line)); err != nil {
		rc.close()
		return
	}
	_, _ = io.Copy(up, br)
	rc.close()
	p.mu.Lock()
	delete(p.conns, rc)
	p.mu.Unlock()
}

// track registers a connection unless its destination is isolated.
func (p *Partition) track(rc *routeConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isolated[rc.to] {
		rc.close()
		return false
	}
	p.conns[rc] = struct{}{}
	return true
}

// cutLocked reports whether rc runs from or to an isolated node. The ids are known once the cluster formed; the
// routes opened meanwhile are matched when a node is isolated.
func (p *Partition) cutLocked(rc *routeConn) bool {
	from, known := p.ids[rc.from]
	return p.isolated[rc.to] || known && p.isolated[from]
}

// Isolate cuts node i off from the other nodes: its route connections are closed and new ones refused. Its clients
// stay connected to it.
func (p *Partition) Isolate(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isolated[i] = true
	for c := range p.conns {
		if p.cutLocked(c) {
			c.close()
			delete(p.conns, c)
		}
	}
}

// Heal lets node i's routes connect again (the nodes retry their configured routes by themselves).
func (p *Partition) Heal(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.isolated, i)
}
