package windowtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/kvwindow/windowtest"
)

func TestMemoryConformance(t *testing.T) {
	windowtest.Run(t, func(t *testing.T) windowtest.Claimer { return windowtest.NewMemory() })
}

func TestMemorySharedConformance(t *testing.T) {
	m := windowtest.NewMemory()
	windowtest.Run(t, func(t *testing.T) windowtest.Claimer { return m })
}

func TestMemoryUnavailable(t *testing.T) {
	ctx := context.Background()
	m := windowtest.NewMemory()
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: kvwindow.Claimant{Seq: 1, Stamp: 1}}
	m.SetUnavailable(true)
	if _, err := m.Claim(ctx, c, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("claim while unavailable: %v", err)
	}
	if _, err := m.Release(ctx, kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: kvwindow.Claimant{Seq: 1}, Delivery: kvwindow.Delivery{Count: 1}}, 1, false); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("release while unavailable: %v", err)
	}
	if err := m.Ping(ctx); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("ping while unavailable: %v", err)
	}
	m.SetUnavailable(false)
	if err := m.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := m.Claim(ctx, c, kvwindow.Known{}); err != nil || out.Status != kvwindow.Won {
		t.Fatalf("claim after recovery: %+v %v", out, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Claim(cctx, c, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("claim with cancelled ctx: %v", err)
	}
}

func TestMemoryClock(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	m := windowtest.NewMemory()
	m.SetClock(func() time.Time { return now })
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: 1500 * time.Millisecond,
		Claimant: kvwindow.Claimant{Seq: 1, Stamp: 10}, Delivery: kvwindow.Delivery{Consumer: 20, Count: 1}}
	first, _ := m.Claim(ctx, c, kvwindow.Known{})
	e, ok, err := m.Get(ctx, "t", "s", "k")
	if err != nil || !ok || e.Claimant != c.Claimant || e.Delivery != c.Delivery || e.TTL != 2*time.Second ||
		!e.ClaimedAt.Equal(now) || e.Revision != first.Revision {
		t.Fatalf("get: %+v %v %v (TTL is rounded up to whole seconds)", e, ok, err)
	}
	// A takeover restarts the claim's TTL from its own time, as the real window's rewrite does.
	now = now.Add(time.Second)
	c.Delivery.Count = 2
	took, _ := m.Claim(ctx, c, kvwindow.Known{})
	if e, _, _ := m.Get(ctx, "t", "s", "k"); took.Status != kvwindow.Owned || e.Revision != took.Revision ||
		e.Delivery != c.Delivery || !e.ExpiresAt().Equal(now.Add(2*time.Second)) {
		t.Fatalf("takeover: %+v, entry %+v", took, e)
	}
	first = took
	c.Claimant = kvwindow.Claimant{Seq: 2, Stamp: 11}
	now = now.Add(1999 * time.Millisecond)
	if out, _ := m.Claim(ctx, c, kvwindow.Known{}); out.Status != kvwindow.Duplicate {
		t.Fatalf("before expiry: %+v", out)
	}
	now = now.Add(time.Millisecond)
	out, _ := m.Claim(ctx, c, kvwindow.Known{})
	if out.Status != kvwindow.Won || out.Revision <= first.Revision {
		t.Fatalf("after expiry: %+v", out)
	}
	if m.Len() != 1 || m.Claims() != 4 {
		t.Fatalf("len %d claims %d", m.Len(), m.Claims())
	}
}

func TestMemoryForget(t *testing.T) {
	ctx := context.Background()
	m := windowtest.NewMemory()
	for _, c := range []kvwindow.Claim{
		{Tenant: "a", Source: "s1", Key: "k1"}, {Tenant: "a", Source: "s1", Key: "k2"},
		{Tenant: "a", Source: "s2", Key: "k1"}, {Tenant: "b", Source: "s1", Key: "k1"},
	} {
		c.TTL, c.Claimant = time.Minute, kvwindow.Claimant{Seq: 1}
		if _, err := m.Claim(ctx, c, kvwindow.Known{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := m.Forget(ctx, "a", "s1", "k1"); n != 1 || err != nil {
		t.Fatalf("forget: %d %v", n, err)
	}
	if n, err := m.Forget(ctx, "a", "s1", "k1"); n != 0 || err != nil {
		t.Fatalf("forget again: %d %v", n, err)
	}
	if n, err := m.ForgetAll(ctx, "a", "s2"); n != 1 || err != nil {
		t.Fatalf("forget source: %d %v", n, err)
	}
	if n, err := m.ForgetAll(ctx, "a", ""); n != 1 || err != nil {
		t.Fatalf("forget tenant: %d %v", n, err)
	}
	if _, ok, _ := m.Get(ctx, "b", "s1", "k1"); !ok {
		t.Fatal("tenant b lost its claim")
	}
	if _, err := m.ForgetAll(ctx, "a.>", ""); !errors.Is(err, kvwindow.ErrInvalid) {
		t.Fatalf("invalid tenant: %v", err)
	}
}
