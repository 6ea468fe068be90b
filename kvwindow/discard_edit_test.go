package kvwindow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestDiscardOldEditedUnderRunningWindow: an operator edits the window bucket's stream to discard old with a
// message limit (nats stream edit KV_dedupe-window --discard old --max-msgs N) under a running worker. New refuses
// such a bucket, since a full bucket would then evict live claims: the server drops the oldest claim to store a new
// one, and a later copy of the evicted claim's event is admitted as new, unmarked and without a word. The running
// window must take the edit up at its next Ping as it does an age limit: Ping fails naming the discard policy and
// the fix, and no claim is written meanwhile, so none is evicted. Before: Ping passed, the next claim evicted the
// first one, and a copy of its event won the key.
func TestDiscardOldEditedUnderRunningWindow(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	w := newWindow(t, js, kvwindow.DefaultConfig())
	first := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "first", TTL: time.Hour, Claimant: envelope(1), Delivery: delivery(1)}
	if out := claim(t, w, first); out.Status != kvwindow.Won {
		t.Fatalf("first claim: %v", out.Status)
	}

	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.Discard, sc.MaxMsgs = jetstream.DiscardOld, 1 })
	if err := w.Ping(ctx); err == nil || !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Errorf("Ping after the bucket was edited to discard old: %v, want it to fail", err)
	} else {
		for _, want := range []string{`bucket "dedupe-window"`, "discard", "nats stream edit KV_dedupe-window --discard new"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Ping: %v\nwant it to say %q", err, want)
			}
		}
	}
	second := kvwindow.Claim{Tenant: "acme", Source: "gh", Key: "second", TTL: time.Hour, Claimant: envelope(2), Delivery: delivery(1)}
	if out, err := w.Claim(ctx, second, kvwindow.Known{}); !errors.Is(err, kvwindow.ErrUnavailable) {
		t.Errorf("claim in a bucket that discards old: %+v, %v; want it refused", out, err)
	}
	// A copy of the first event (another envelope) is still its duplicate: the first claim was not evicted.
	if e, ok, err := w.Get(ctx, first.Tenant, first.Source, first.Key); err != nil || !ok {
		t.Fatalf("the first claim after the edit: %+v %v %v, want it still held (evicted: a copy of its event "+
			"would be admitted as new)", e, ok, err)
	}

	// The operator puts discard new back: the next Ping passes and claims are taken again.
	editStream(t, js, "KV_dedupe-window", func(sc *jetstream.StreamConfig) { sc.Discard, sc.MaxMsgs = jetstream.DiscardNew, -1 })
	if err := w.Ping(ctx); err != nil {
		t.Fatalf("Ping once discard new is back: %v", err)
	}
	if out := claim(t, w, second); out.Status != kvwindow.Won {
		t.Fatalf("claim once discard new is back: %v", out.Status)
	}
}

// TestEvictsClaims: which bucket streams may drop live claims to store new ones.
func TestEvictsClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  jetstream.StreamConfig
		want bool
	}{
		{"discard new (as created)", jetstream.StreamConfig{Discard: jetstream.DiscardNew}, false},
		{"discard new with limits", jetstream.StreamConfig{Discard: jetstream.DiscardNew, MaxMsgs: 1, MaxBytes: 1 << 20}, false},
		{"discard old", jetstream.StreamConfig{Discard: jetstream.DiscardOld}, true},
		{"discard old with a message limit", jetstream.StreamConfig{Discard: jetstream.DiscardOld, MaxMsgs: 1}, true},
	} {
		if got := kvwindow.EvictsClaims(tc.cfg); got != tc.want {
			t.Errorf("%s: evictsClaims = %v, want %v", tc.name, got, tc.want)
		}
	}
}
