package receiver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// The replay guard's bucket deleted under a running receiver: every guarded delivery is answered 503 from then on
// (its claims are gone, and the window claims nothing until the receiver is restarted), so /readyz says so, naming
// the bucket, rather than keeping the receiver in a load balancer that sends it deliveries it cannot store.
func TestReplayGuardBucketDeletedNotReady(t *testing.T) {
	e := startJS(t, true)
	window, js := openWindow(t, e, false)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Window = window; c.PublishTimeout = 500 * time.Millisecond })
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		ready := do(r, http.MethodGet, "/readyz", nil, "")
		if ready.Code == http.StatusServiceUnavailable && strings.Contains(ready.Body.String(), window.Bucket()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the delete: /readyz %d %s", ready.Code, ready.Body.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
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
