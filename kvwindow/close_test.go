package kvwindow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestCloseEndsTheWindow: Close drops the window's answer subscription (the connection keeps no subscription of
// it), every later call fails at once with ErrUnavailable naming the bucket, and a second Close does nothing.
func TestCloseEndsTheWindow(t *testing.T) {
	srv := natstest.Run(t)
	js := jsFor(t, srv.ClientURL())
	cfg := kvwindow.DefaultConfig()
	cfg.Shards = 2
	// nats.go's own request subscription is made by the first request: make it before counting.
	if _, err := js.AccountInfo(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	before := js.Conn().NumSubscriptions()
	w := newWindow(t, js, cfg)
	if got := js.Conn().NumSubscriptions(); got <= before {
		t.Fatalf("subscriptions %d after New, %d before: the window's answer subscription is missing", got, before)
	}
	c := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "k", TTL: time.Minute, Claimant: envelope(1), Delivery: delivery(1)}
	claim(t, w, c)
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := js.Conn().NumSubscriptions(); got != before {
		t.Errorf("subscriptions %d after Close, want %d", got, before)
	}
	start := time.Now()
	_, err := w.Claim(ctxT(t, 10*time.Second), c, kvwindow.Known{})
	var be *kvwindow.BucketError
	if !errors.Is(err, kvwindow.ErrUnavailable) || !errors.As(err, &be) || be.Bucket == "" {
		t.Errorf("Claim after Close: %v; want ErrUnavailable with its bucket", err)
	}
	if _, _, err := w.Get(ctxT(t, 10*time.Second), "acme", "gh", "k"); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Errorf("Get after Close: %v; want ErrUnavailable", err)
	}
	if err := w.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Errorf("Ping after Close: %v; want ErrUnavailable", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("calls after Close took %s, want an immediate failure", took)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
