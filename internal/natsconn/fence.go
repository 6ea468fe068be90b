package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFenced is the error of a write to a connection fenced after a pause of the process.
var ErrFenced = errors.New("natsconn: connection fenced: the process was paused, so what it had buffered is dropped instead of sent late")

// fenceTick is how often the fence's clock ticks while a connection is open.
const fenceTick = 100 * time.Millisecond

// fence closes connections instead of writing to them once the process was paused (SIGSTOP, a frozen VM or
// container) for longer than after. A publish handed to the client library before the pause would otherwise go
// out after it — possibly after the output's duplicate window, when another replica has long published the same
// event. The pause shows as a gap in the monotonic clock between two ticks of a ticker; whichever comes first
// after the pause, the ticker or a write, fences: the write checks the gap since the last tick itself, and the
// ticker, seeing the gap, moves to a new generation before it records its tick, so that a write that reads the
// new tick also reads the new generation. Connections dialed in the new generation are not fenced.
type fence struct {
	after  time.Duration
	log    *slog.Logger
	clock  func() time.Duration // the monotonic clock, which keeps counting while the process is stopped
	dial   func(network, address string) (net.Conn, error)
	manual bool // no ticker: the tests call step

	last atomic.Int64  // clock() of the last tick
	gen  atomic.Uint64 // pauses seen so far

	mu      sync.Mutex
	open    int           // connections not closed yet; the ticker runs while there is one
	stopped chan struct{} // closed to stop the ticker (nil: not running)
}

func newFence(after time.Duration, log *slog.Logger, dial func(network, address string) (net.Conn, error)) *fence {
	epoch := time.Now()
	return &fence{after: after, log: log, clock: func() time.Duration { return time.Since(epoch) }, dial: dial}
}

// Dial dials and wraps the connection (nats.SetCustomDialer).
func (f *fence) Dial(network, address string) (net.Conn, error) {
	c, err := f.dial(network, address)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.open++
	if f.stopped == nil {
		f.last.Store(int64(f.clock()))
		f.stopped = make(chan struct{})
		if !f.manual {
			go f.tick(f.stopped)
		}
	}
	f.mu.Unlock()
	return &fencedConn{Conn: c, f: f, gen: f.gen.Load()}, nil
}

// tick runs while a connection is open (the fence's connections own it).
func (f *fence) tick(stopped <-chan struct{}) {
	t := time.NewTicker(fenceTick)
	defer t.Stop()
	for {
		select {
		case <-stopped:
			return
		case <-t.C:
		}
		f.step()
	}
}

// step is one tick: a new generation when the gap since the last tick is a pause, then the tick.
func (f *fence) step() {
	now := f.clock()
	if gap := now - time.Duration(f.last.Load()); gap > f.after {
		g := f.gen.Add(1) // before the tick is recorded: see fence
		f.log.Warn("the process was paused; its NATS connection is fenced: nothing it buffered before the pause is sent",
			"pause", gap.Round(time.Millisecond), "generation", g)
	}
	f.last.Store(int64(now))
}

// closed is called once per connection closed.
func (f *fence) closed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open--
	if f.open == 0 && f.stopped != nil {
		close(f.stopped)
		f.stopped = nil
	}
}

// paused reports why a connection of generation gen must not write now ("" when it may).
func (f *fence) paused(gen uint64) string {
	last := time.Duration(f.last.Load())
	if g := f.gen.Load(); g != gen {
		return "the process was paused since the connection was made"
	}
	if gap := f.clock() - last; gap > f.after {
		return fmt.Sprintf("the process was paused (no tick for %s)", gap.Round(time.Millisecond))
	}
	return ""
}

// fencedConn is a connection that closes itself instead of writing after a pause.
type fencedConn struct {
	net.Conn
	f         *fence
	gen       uint64
	closeOnce sync.Once
	fenced    atomic.Bool
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if c.fenced.Load() {
		return 0, ErrFenced
	}
	if why := c.f.paused(c.gen); why != "" {
		c.fenced.Store(true)
		c.f.log.Warn("NATS connection fenced instead of written to", "why", why, "dropped_bytes", len(b))
		_ = c.Close()
		return 0, fmt.Errorf("%w (%s)", ErrFenced, why)
	}
	return c.Conn.Write(b)
}

func (c *fencedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(c.f.closed)
	return err
}
