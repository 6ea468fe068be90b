package kvwindow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// A bucket that does not allow direct gets is read through the stream leader's API even for a first delivery, as
// the jetstream package would read it: a direct get would find no responder.
func TestFirstDeliveryWithoutDirect(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	newWindow(t, js, kvwindow.DefaultConfig()) // provisions the bucket
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.AllowDirect = false })
	w := newWindow(t, js, kvwindow.DefaultConfig())
	direct, get := spyReads(t, s.URL())
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: envelope(1), Delivery: delivery(1)}
	if got := claim(t, w, c); got.Status != kvwindow.Won {
		t.Fatalf("first claim: %v", got.Status)
	}
	c.Claimant = envelope(2)
	if got := claim(t, w, c); got.Status != kvwindow.Duplicate || got.HolderSeq != 1 {
		t.Fatalf("other claimant, first delivery: %+v", got)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if get.Load() < 1 {
			return fmt.Errorf("%d leader gets", get.Load())
		}
		return nil
	})
	if n := direct.Load(); n != 0 {
		t.Fatalf("%d direct gets on a bucket that allows none", n)
	}
}

// A window on a JetStream domain sends its reads under the domain's API prefix, on both paths, and every command
// that reads a key decides as without the domain.
func TestReadsUnderDomain(t *testing.T) {
	s := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.JetStreamDomain = "hub" }))
	js, err := jetstream.NewWithDomain(natstest.Connect(t, s.URL()), "hub")
	if err != nil {
		t.Fatal(err)
	}
	w := newWindow(t, js, kvwindow.DefaultConfig())
	ctx := ctxT(t, 30*time.Second)
	c := kvwindow.Claim{Tenant: "t", Source: "s", Key: "k", TTL: time.Minute, Claimant: envelope(1), Delivery: delivery(1)}
	won := claim(t, w, c)
	if won.Status != kvwindow.Won {
		t.Fatalf("first claim: %+v", won)
	}
	dup := c
	dup.Claimant = envelope(2)
	if got := claim(t, w, dup); got.Status != kvwindow.Duplicate || got.Revision != won.Revision {
		t.Fatalf("copy, first delivery (direct get): %+v", got)
	}
	dup.Delivery = delivery(2)
	if got := claim(t, w, dup); got.Status != kvwindow.Duplicate || got.Revision != won.Revision {
		t.Fatalf("copy, redelivered (leader): %+v", got)
	}
	if got := claim(t, w, c); got.Status != kvwindow.Owned || got.Revision != won.Revision {
		t.Fatalf("same delivery again: %+v", got)
	}
	e, ok, err := w.Get(ctx, "t", "s", "k")
	if err != nil || !ok || e.Revision != won.Revision || e.Claimant != c.Claimant || e.TTL != time.Minute {
		t.Fatalf("Get = %+v, %v, %v", e, ok, err)
	}
	rev, ok, err := w.MarkPublished(ctx, c, won.Revision, time.Time{}) // no first claim time: reads the claim first
	if err != nil || !ok || rev <= won.Revision {
		t.Fatalf("MarkPublished = %d, %v, %v", rev, ok, err)
	}
	if got := claim(t, w, dup); got.Status != kvwindow.Duplicate || !got.Published || got.Revision != rev {
		t.Fatalf("copy after the publish: %+v", got)
	}
	if n, err := kvwindow.ManagerOf(w).Forget(ctx, "t", "s", "k"); n != 1 || err != nil {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	if _, ok, err := w.Get(ctx, "t", "s", "k"); ok || err != nil {
		t.Fatalf("Get after Forget = %v, %v", ok, err)
	}
	if got := claim(t, w, dup); got.Status != kvwindow.Won {
		t.Fatalf("copy after Forget (over the purge marker): %+v", got)
	}
}
