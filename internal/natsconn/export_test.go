package natsconn

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
)

// Fence is the pause fence with a clock and ticks the test drives.
type Fence struct{ f *fence }

// NewManualFence is a fence that counts a gap over after as a pause, reading clock, ticking only on Step.
func NewManualFence(after time.Duration, clock func() time.Duration, log *slog.Logger) *Fence {
	d := &net.Dialer{}
	return &Fence{&fence{after: after, log: log, clock: clock, dial: d.Dial, manual: true}}
}

func (f *Fence) Dial(network, address string) (net.Conn, error) { return f.f.Dial(network, address) }
func (f *Fence) Step()                                          { f.f.step() }

// Connect is ConnectContext without cancellation.
func Connect(cfg Config) (*nats.Conn, error) { return ConnectContext(context.Background(), cfg) }
