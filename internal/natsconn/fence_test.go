package natsconn_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// sink accepts one connection and reports everything it reads until the connection closes.
func sink(t *testing.T) (addr string, got <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		ch <- b
	}()
	return ln.Addr().String(), ch
}

func received(t *testing.T, got <-chan []byte) string {
	t.Helper()
	select {
	case b := <-got:
		return string(b)
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's connection was never closed")
		return ""
	}
}

// TestFenceAfterPause drives the fence's clock by hand: after a gap in the clock longer than the threshold, the
// first write closes the connection and sends nothing, whether the ticker or the write comes first after the
// pause; a connection dialed after the pause writes again; without a pause every write goes through.
func TestFenceAfterPause(t *testing.T) {
	const after = 2 * time.Second
	for _, tc := range []struct {
		name       string
		pause      time.Duration
		tickFirst  bool // the ticker runs after the pause, before the write
		wantFenced bool
	}{
		{name: "no pause", pause: 150 * time.Millisecond},
		{name: "no pause, tick first", pause: 150 * time.Millisecond, tickFirst: true},
		{name: "pause, write first", pause: 25 * time.Second, wantFenced: true},
		{name: "pause, tick first", pause: 25 * time.Second, tickFirst: true, wantFenced: true},
		{name: "just over the threshold", pause: after + time.Millisecond, wantFenced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now atomic.Int64
			clock := func() time.Duration { return time.Duration(now.Load()) }
			log := &natstest.Buffer{}
			f := natsconn.NewManualFence(after, clock, slog.New(slog.NewTextHandler(log, nil)))
			addr, got := sink(t)
			c, err := f.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 { // a process running: ticks every 100ms, writes between them
				now.Add(int64(100 * time.Millisecond))
				f.Step()
				if _, err := c.Write([]byte("before;")); err != nil {
					t.Fatalf("write before the pause: %v", err)
				}
			}
			now.Add(int64(tc.pause))
			if tc.tickFirst {
				f.Step()
			}
			_, err = c.Write([]byte("after;"))
			if tc.wantFenced {
				if !errors.Is(err, natsconn.ErrFenced) {
					t.Fatalf("write after a %s pause: %v, want ErrFenced", tc.pause, err)
				}
				if _, err := c.Write([]byte("again;")); !errors.Is(err, natsconn.ErrFenced) {
					t.Fatalf("second write after the fence: %v, want ErrFenced", err)
				}
			} else if err != nil {
				t.Fatalf("write after %s: %v", tc.pause, err)
			}
			if !tc.wantFenced {
				c.Close()
			}
			want := strings.Repeat("before;", 5)
			if !tc.wantFenced {
				want += "after;"
			}
			if s := received(t, got); s != want {
				t.Errorf("the peer received %q, want %q", s, want)
			}
			if tc.wantFenced {
				if !strings.Contains(log.String(), "fenced") {
					t.Errorf("the fence is not logged:\n%s", log.String())
				}
				// A connection made after the pause is not fenced.
				addr2, got2 := sink(t)
				c2, err := f.Dial("tcp", addr2)
				if err != nil {
					t.Fatal(err)
				}
				now.Add(int64(100 * time.Millisecond))
				f.Step()
				if _, err := c2.Write([]byte("new;")); err != nil {
					t.Fatalf("write on a connection dialed after the pause: %v", err)
				}
				c2.Close()
				if s := received(t, got2); s != "new;" {
					t.Errorf("the new connection's peer received %q", s)
				}
			}
		})
	}
}

// TestFencedConnectionDropsBuffered is the fence under a real process pause: a child process connected with a
// fence of 1s publishes while the test stops it (SIGSTOP) for 3s; every message it handed to the client library
// before the pause and that had not reached the socket is dropped, none is sent after the pause on either
// connection. The child publishes without waiting for answers; the test stops it, reads what the server got so
// far, lets it go on and checks that nothing handed over before SIGCONT arrives after it. With
// NATSCONN_FENCE_OFF=1 the child runs without the fence: its log never says fenced, and in 1 of 4 runs a message it
// had buffered arrived after the pause.
func TestFencedConnectionDropsBuffered(t *testing.T) {
	if os.Getenv("NATSCONN_FENCE_CHILD") != "" {
		fenceChild()
		return
	}
	if testing.Short() {
		t.Skip("stops a child process for 3s")
	}
	srv := natstest.Run(t)
	sub := natstest.Connect(t, srv.URL())
	msgs := make(chan *nats.Msg, 1<<16)
	if _, err := sub.ChanSubscribe("fence.>", msgs); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFencedConnectionDropsBuffered$")
	cmd.Env = append(os.Environ(), "NATSCONN_FENCE_CHILD="+srv.URL())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait for the child to publish, then stop it mid-stream.
	select {
	case <-msgs:
	case <-time.After(20 * time.Second):
		t.Fatalf("the child published nothing: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// What the child had written to its socket before it stopped arrives meanwhile.
	time.Sleep(3 * time.Second) // the pause itself, not a wait for a condition
	var before int
drain:
	for {
		select {
		case <-msgs:
			before++
		default:
			break drain
		}
	}
	resumed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Each message carries the time the child handed it to the client library: one handed over before SIGCONT
	// and arriving after it is one the fence should have dropped.
	late, after := 0, 0
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-msgs:
			if m.Subject == "fence.resumed" {
				t.Logf("stopped %s; %d messages arrived during the pause; after it, %d published after SIGCONT and %d "+
					"published before it; child log:\n%s", resumed.Sub(stopped).Round(time.Millisecond), before, after, late, stderr.String())
				if late != 0 {
					t.Errorf("%d messages handed to the client before the pause were sent after it", late)
				}
				if !strings.Contains(stderr.String(), "fenced") {
					t.Errorf("the child did not log the fence")
				}
				return
			}
			at, err := time.Parse(time.RFC3339Nano, m.Header.Get("At"))
			if err != nil {
				t.Fatalf("message without its time: %v", m.Header)
			}
			if at.Before(resumed) {
				late++
			} else {
				after++
			}
		case <-deadline:
			t.Fatalf("the child never said it resumed; child log:\n%s", stderr.String())
		}
	}
}

// fenceChild publishes steadily on a fenced connection, each message stamped with the time it is handed over. A
// second after it notices it was paused (a gap in its own loop), it publishes "fence.resumed" — on the connection
// that replaced the fenced one — and exits.
func fenceChild() {
	url := os.Getenv("NATSCONN_FENCE_CHILD")
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fence := time.Second
	if os.Getenv("NATSCONN_FENCE_OFF") != "" {
		fence = 0
	}
	nc, err := natsconn.Connect(natsconn.Config{URL: url, PauseFence: fence, Logger: log})
	if err != nil {
		log.Error("connect", "err", err)
		os.Exit(1)
	}
	m := nats.NewMsg("fence.n")
	m.Data = make([]byte, 512)
	last := time.Now()
	var resumed time.Time
	for {
		now := time.Now()
		if resumed.IsZero() && now.Sub(last) > time.Second {
			resumed = now
		}
		last = now
		if !resumed.IsZero() && now.Sub(resumed) > time.Second {
			r := nats.NewMsg("fence.resumed")
			for nc.PublishMsg(r) != nil || nc.FlushTimeout(time.Second) != nil {
				time.Sleep(10 * time.Millisecond)
			}
			nc.Close()
			os.Exit(0)
		}
		m.Header.Set("At", now.Format(time.RFC3339Nano))
		_ = nc.PublishMsg(m) // fails while reconnecting: no reconnect buffer
		// Below what the socket takes: a write the kernel had begun before the pause finishes after it, and no
		// process can take that back; a worker's connection is not saturated either.
		time.Sleep(200 * time.Microsecond)
	}
}
