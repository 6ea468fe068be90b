package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// guardedOnly serves guarded sources alone: github and shopify.
const guardedOnly = "sources:\n  gh: {dedupe: github, verify: github}\n  shop: {dedupe: shopify, verify: shopify}\n"

// The replay guard's bucket deleted under a running receiver whose every source is guarded: every delivery is
// answered 503 from then on (its claims are gone, and the window claims nothing until the receiver is restarted),
// so /readyz says so, naming the bucket, rather than keeping the receiver in a load balancer that sends it
// deliveries it cannot store.
func TestReplayGuardBucketDeletedNotReady(t *testing.T) {
	e := startJS(t, true)
	window, js := openWindow(t, e, false)
	r, _ := newReceiver(t, e, policyOf(t, guardedOnly), func(c *receiver.Config) { c.Window = window; c.PublishTimeout = 500 * time.Millisecond })
	if ready := do(r, http.MethodGet, "/readyz", nil, ""); ready.Code != http.StatusOK {
		t.Fatalf("before: /readyz %d %s", ready.Code, ready.Body.String())
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatalf("before: Ready: %v", err)
	}
	if err := js.DeleteKeyValue(context.Background(), window.Bucket()); err != nil {
		t.Fatal(err)
	}
	body := `{"n":11}`
	rec := do(r, http.MethodPost, "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "x2"), body)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("a guarded delivery after the delete: %d %s", rec.Code, rec.Body.String())
	}
	// Ready looks afresh; /readyz answers from a lookup at most a second old.
	err := r.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "replay guard's bucket "+window.Bucket()) {
		t.Fatalf("after the delete: Ready: %v", err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if ready := do(r, http.MethodGet, "/readyz", nil, ""); ready.Code != http.StatusServiceUnavailable || !strings.Contains(ready.Body.String(), window.Bucket()) {
			return fmt.Errorf("after the delete: /readyz %d %s", ready.Code, ready.Body.String())
		}
		return nil
	})
}

// Only a receiver that guards a source looks at the window: one whose sources are not guarded stays ready
// without it.
func TestReadyWithoutGuardedSources(t *testing.T) {
	e := startJS(t, true)
	window, js := openWindow(t, e, false)
	p := policyOf(t, "sources:\n  open: {dedupe: {header: X-Id}, verify: none}\n")
	r, _ := newReceiver(t, e, p, func(c *receiver.Config) { c.Window = window })
	if err := js.DeleteKeyValue(context.Background(), window.Bucket()); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// The replay guard's bucket deleted under a receiver that also serves unguarded sources: those deliveries can
// still be stored, so the receiver stays ready — otherwise every ingest pod would leave the Service at once and
// take the unguarded sources down with the guarded ones. Guarded deliveries are answered 503 (the provider
// retries), and dedupeworker_ingest_replay_guard_up says the guard is down.
func TestReplayGuardBucketDeletedMixedStaysReady(t *testing.T) {
	e := startJS(t, true)
	window, js := openWindow(t, e, false)
	p := policyOf(t, "sources:\n  gh: {dedupe: github, verify: github}\n  open: {dedupe: {header: X-Id}, verify: none}\n")
	r, logs := newReceiver(t, e, p, func(c *receiver.Config) { c.Window = window; c.PublishTimeout = 500 * time.Millisecond })
	up := `dedupeworker_ingest_replay_guard_up{bucket="` + window.Bucket() + `"}`
	if v := metricValue(metricsText(t, r), up); v != 1 {
		t.Fatalf("before: %s %v, want 1", up, v)
	}
	if err := js.DeleteKeyValue(context.Background(), window.Bucket()); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatalf("after the delete: Ready: %v", err)
	}
	if v := metricValue(metricsText(t, r), up); v != 0 {
		t.Fatalf("after the delete: %s %v, want 0", up, v)
	}
	rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "o-1"), `{"n":1}`)
	if rec.Code != http.StatusAccepted || e.lastSeq(t) != 1 {
		t.Fatalf("an unguarded delivery after the delete: %d %s; INGEST holds %d", rec.Code, rec.Body.String(), e.lastSeq(t))
	}
	body := `{"n":12}`
	rec = do(r, http.MethodPost, "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "x3"), body)
	if rec.Code != http.StatusServiceUnavailable || e.lastSeq(t) != 1 {
		t.Fatalf("a guarded delivery after the delete: %d %s; INGEST holds %d", rec.Code, rec.Body.String(), e.lastSeq(t))
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if ready := do(r, http.MethodGet, "/readyz", nil, ""); ready.Code != http.StatusOK || !strings.Contains(ready.Body.String(), window.Bucket()) {
			return fmt.Errorf("after the delete: /readyz %d %s", ready.Code, ready.Body.String())
		}
		return nil
	})
	// Said once, not on every lookup.
	for range 3 {
		_ = r.Ready(context.Background())
	}
	if n := strings.Count(logs.String(), "replay guard down"); n != 1 {
		t.Fatalf("the guard's failure logged %d times, want once:\n%s", n, logs.String())
	}
}

// The replay guard's state fails readiness only when every served source is guarded: otherwise the unguarded
// sources' deliveries can still be stored.
func TestGuardReadiness(t *testing.T) {
	down := errors.New("receiver: the replay guard's bucket dedupe-window-replay: bucket lost")
	for _, tc := range []struct {
		name            string
		served, guarded int
		guard           error
		want            error
	}{
		{"every source guarded, guard up", 2, 2, nil, nil},
		{"every source guarded, guard down", 2, 2, down, down},
		{"one source, guarded, guard down", 1, 1, down, down},
		{"mixed, guard down", 2, 1, down, nil},
		{"mixed, guard up", 3, 1, nil, nil},
		{"none guarded", 2, 0, down, nil},
	} {
		if got := receiver.GuardReadiness(tc.served, tc.guarded, tc.guard); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
