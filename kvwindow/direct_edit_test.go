package kvwindow_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestDirectGetsTurnedOffUnderRunningWindow: an operator turns direct gets off on the window bucket's stream (nats
// stream edit KV_dedupe-window --no-allow-direct) under a running worker. A copy's losing create is read back by a
// direct get, which nothing answers any more: every copy of an event already claimed failed as "window unavailable"
// and was handed back, for as long as the worker ran. The running window must follow the edit at its next Ping and
// read from the stream leader instead. Before: the copy's claim kept failing.
func TestDirectGetsTurnedOffUnderRunningWindow(t *testing.T) {
	ctx, w, copyOf := directGetsTurnedOff(t)
	if err := w.Ping(ctx); err != nil {
		t.Fatalf("Ping after direct gets were turned off: %v", err)
	}
	out, err := w.Claim(ctx, copyOf, kvwindow.Known{})
	if err != nil || out.Status != kvwindow.Duplicate {
		t.Fatalf("a copy's claim with direct gets off: %+v, %v; want Duplicate", out, err)
	}
}

// The same edit, and a copy claims before any Ping: its read-back goes to the stream leader at once rather than
// fail as "window unavailable" (which, with forwarding while the window is down, would publish the copy).
func TestDirectGetsTurnedOffReadAtLeaderAtOnce(t *testing.T) {
	ctx, w, copyOf := directGetsTurnedOff(t)
	out, err := w.Claim(ctx, copyOf, kvwindow.Known{})
	if err != nil || out.Status != kvwindow.Duplicate {
		t.Fatalf("a copy's claim with direct gets just turned off: %+v, %v; want Duplicate", out, err)
	}
}

// directGetsTurnedOff claims a key in a window whose bucket allows direct gets, then turns them off on the bucket's
// stream as an operator would; it returns the window and a copy's claim of the same key.
func directGetsTurnedOff(t *testing.T) (context.Context, *kvwindow.Window, kvwindow.Claim) {
	t.Helper()
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	first := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(1)}
	if out := claim(t, w, first); out.Status != kvwindow.Won {
		t.Fatalf("first claim: %v", out.Status)
	}
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) {
		if !sc.AllowDirect {
			t.Fatal("the bucket was created without direct gets; this test needs them on first")
		}
		sc.AllowDirect = false
	})
	copyOf := first
	copyOf.Claimant = envelope(2)
	return ctx, w, copyOf
}
