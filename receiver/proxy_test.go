package receiver_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// natsProxy is a TCP relay between a NATS client and a real nats-server whose server-to-client direction can be
// held: what the server sends (a PubAck, say) waits in the relay until release. The client's publishes still reach
// the server, so an envelope can be stored while its acknowledgement is late — the case a publish timeout cannot
// tell from a lost publish.
type natsProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	held    bool
	waiting *sync.Cond
	conns   []net.Conn
	wg      sync.WaitGroup
}

func startProxy(tb testing.TB, target string) *natsProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &natsProxy{ln: ln, target: target}
	p.waiting = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept() // owned by the proxy: ends when close closes the listener
	tb.Cleanup(p.close)
	return p
}

func (p *natsProxy) url() string { return "nats://" + p.ln.Addr().String() }

// hold stops forwarding what the server sends; release forwards it again, in order.
func (p *natsProxy) hold() { p.mu.Lock(); p.held = true; p.mu.Unlock() }

func (p *natsProxy) release() {
	p.mu.Lock()
	p.held = false
	p.waiting.Broadcast()
	p.mu.Unlock()
}

func (p *natsProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); p.toClient(c, s); c.Close() }()
	}
}

// toClient copies server to client, waiting while held.
func (p *natsProxy) toClient(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held {
				p.waiting.Wait()
			}
			p.mu.Unlock()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *natsProxy) close() {
	p.release()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
