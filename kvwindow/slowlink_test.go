package kvwindow_test

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowLink is a loopback TCP proxy to a real server that holds what the server sends for delay (0: passes it on
// at once) before the client gets it, in order, as a server that takes that long to answer would. What the
// client sends goes through at once.
type slowLink struct {
	url   string
	delay atomic.Int64 // nanoseconds
}

func newSlowLink(t *testing.T, port int) *slowLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &slowLink{url: "nats://" + ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Add(3)
			go func() { defer wg.Done(); pipe(server, client, nil) }()
			chunks := make(chan timedChunk, 1024)
			go func() {
				defer wg.Done()
				defer close(chunks)
				pipe(client, server, func(b []byte) { chunks <- l.stamp(b) })
			}()
			go func() { defer wg.Done(); l.deliver(client, chunks) }()
		}
	}()
	return l
}

type timedChunk struct {
	due time.Time
	b   []byte
}

func (l *slowLink) stamp(b []byte) timedChunk {
	return timedChunk{due: time.Now().Add(time.Duration(l.delay.Load())), b: append([]byte(nil), b...)}
}

// deliver writes each chunk to the client when it is due.
func (l *slowLink) deliver(client net.Conn, chunks <-chan timedChunk) {
	defer client.Close()
	for c := range chunks {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d) // the delay is the link's behaviour, not a wait for a condition
		}
		if _, err := client.Write(c.b); err != nil {
			return
		}
	}
}

// pipe copies from src to dst (or, with hold, hands each read to it) until either side closes.
func pipe(dst, src net.Conn, hold func([]byte)) {
	defer dst.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if hold != nil {
				hold(buf[:n])
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
