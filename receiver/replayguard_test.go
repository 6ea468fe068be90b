package receiver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// openWindow is the worker's window (provisioned) on e's server, over a connection of its own when own is set.
func openWindow(tb testing.TB, e *jsEnv, own bool) (*kvwindow.Window, jetstream.JetStream) {
	tb.Helper()
	js := e.js
	if own {
		var err error
		if js, err = jetstream.New(natstest.Connect(tb, e.srv.URL())); err != nil {
			tb.Fatal(err)
		}
	}
	cfg := kvwindow.DefaultConfig()
	cfg.Storage, cfg.Timeout = jetstream.MemoryStorage, 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := kvwindow.New(ctx, js, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return w, js
}

// policyOf is the policy of a sources document with the test secrets of the sources it declares, and the
// variables of extra.
func policyOf(tb testing.TB, doc string, extra ...string) *receiver.Policy {
	tb.Helper()
	src := mustSources(tb, doc)
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secretsOf(tb, src, extra...)})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// secretsOf are the test secrets of the sources src declares, and the variables of extra.
func secretsOf(tb testing.TB, src keys.Sources, extra ...string) *receiver.Secrets {
	tb.Helper()
	environ := extra
	for _, kv := range testEnviron() {
		for _, id := range src.IDs() {
			if strings.HasPrefix(kv, receiver.SecretEnv(id)+"=") {
				environ = append(environ, kv)
			}
		}
	}
	dir := ""
	if _, ok := src.Specs["st"]; ok {
		dir = testSecretsDir(tb)
	}
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: dir, Environ: environ, Sources: src.IDs()})
	if err != nil {
		tb.Fatal(err)
	}
	return secrets
}

// An attacker holding one captured genuine delivery of a source whose signature covers the body alone re-sends it
// with a fresh id (or none): it verifies, and without the guard each id is a new event. With the guard the body is
// recorded in the window under the id it first arrived with: a genuine retry (same id) still reaches the stream,
// every other id is answered 202 and not published, counted and logged, and the claim is in the window under the
// body's key, naming the first id's fingerprint. Other tenants are other scopes. With no window (the receiver
// before the guard) the fresh-id copies are stored: the case this test exists for.
func TestReplayGuardCatchesFreshIDs(t *testing.T) {
	e := startJS(t, true)
	window, _ := openWindow(t, e, false)
	r, logs := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Window = window })
	unguarded, _ := newReceiver(t, e, testPolicy(t))
	body := `{"action":"opened","number":7}`
	sig := githubSig(ghOld, body)
	gh := func(id string) http.Header {
		h := hdr("X-Hub-Signature-256", sig)
		if id != "" {
			h.Set("X-GitHub-Delivery", id)
		}
		return h
	}
	shopBody := `{"id":820982911946154508,"email":"jon@example.com"}`
	shop := func(idName, id string) http.Header {
		return hdr("X-Shopify-Hmac-Sha256", shopifySig(shopSecret, shopBody), idName, id)
	}
	type step struct {
		name, path string
		hdr        http.Header
		body       string
		stored     bool
	}
	for _, s := range []step{
		{"github, genuine", "/hooks/acme/gh", gh("d-genuine"), body, true},
		{"github, genuine retry (same id)", "/hooks/acme/gh", gh("d-genuine"), body, true},
		{"github, replay with a fresh id", "/hooks/acme/gh", gh("d-forged-1"), body, false},
		{"github, replay with another fresh id", "/hooks/acme/gh", gh("d-forged-2"), body, false},
		{"github, replay without an id", "/hooks/acme/gh", gh(""), body, false},
		{"github, same body for another tenant", "/hooks/globex/gh", gh("d-forged-1"), body, true},
		{"shopify, genuine", "/hooks/acme/shop", shop("X-Shopify-Webhook-Id", "w-1"), shopBody, true},
		{"shopify, replay with a fresh id", "/hooks/acme/shop", shop("X-Shopify-Webhook-Id", "w-2"), shopBody, false},
		{"shopify, replay in the Events form", "/hooks/acme/shop", shop("Shopify-Webhook-Id", "w-3"), shopBody, false},
		{"shopify, genuine retry", "/hooks/acme/shop", shop("X-Shopify-Webhook-Id", "w-1"), shopBody, true},
	} {
		before := e.lastSeq(t)
		rec := do(r, http.MethodPost, s.path, s.hdr, s.body)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", s.name, rec.Code, rec.Body.String())
		}
		if stored := e.lastSeq(t) > before; stored != s.stored {
			t.Fatalf("%s: stored %v, want %v (%s)", s.name, stored, s.stored, rec.Body.String())
		}
		if !s.stored && !strings.Contains(rec.Body.String(), "not published") {
			t.Errorf("%s: answer %q", s.name, rec.Body.String())
		}
	}
	text := metricsText(t, r)
	for src, want := range map[string]float64{"gh": 3, "shop": 2} {
		if got := metricValue(text, `dedupeworker_ingest_replays_total{source="`+src+`"}`); got != want {
			t.Errorf("replays_total{source=%q} = %v, want %v", src, got, want)
		}
		if got := metricValue(text, requests(src, receiver.OutcomeReplay)); got != want {
			t.Errorf("requests_total{%s, replay} = %v, want %v", src, got, want)
		}
	}
	if !strings.Contains(logs.String(), "replay guard") || !strings.Contains(logs.String(), "d-forged-1") ||
		!strings.Contains(logs.String(), "DEDUPE_BUCKET="+window.Bucket()+" DEDUPE_WINDOW_SHARDS=1 dedupeworker window get --tenant acme --source gh --key 'body sha256:") {
		t.Errorf("no replay log line: %s", logs.String())
	}

	// What `dedupeworker window get --tenant acme --source gh --key 'body sha256:<hex>'` reads.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entry, ok, err := window.Get(ctx, "acme", "gh", receiver.ReplayKey([]byte(body)))
	if err != nil || !ok {
		t.Fatalf("window get of the body's key: %v %v", ok, err)
	}
	if entry.Claimant.Seq != receiver.IDFingerprint("d-genuine") || entry.TTL != keys.DefaultTTL {
		t.Errorf("guard claim %+v, want claimant %d, TTL %s", entry, receiver.IDFingerprint("d-genuine"), keys.DefaultTTL)
	}

	// The receiver before the guard (no window) stores every fresh id as a new verified event.
	before := e.lastSeq(t)
	if rec := do(unguarded, http.MethodPost, "/hooks/acme/gh", gh("d-forged-3"), body); rec.Code != http.StatusAccepted || e.lastSeq(t) != before+1 {
		t.Fatalf("unguarded: %d %s", rec.Code, rec.Body.String())
	}
}

// The switch: replay_guard: off lets a github source publish a replay; on guards an hmac source keyed by a header
// (off by default), and a source keyed by its body needs no guard (a replay has the same key).
func TestReplayGuardSwitch(t *testing.T) {
	e := startJS(t, true)
	window, _ := openWindow(t, e, false)
	p := policyOf(t, `sources:
  gh:  {dedupe: github, verify: {scheme: github, replay_guard: off}}
  sig: {dedupe: {header: X-Id}, verify: {scheme: hmac, header: X-Sig, replay_guard: on}}
`)
	if got := p.Guarded(); len(got) != 1 || got[0] != "sig" {
		t.Fatalf("Guarded() = %v, want [sig]", got)
	}
	r, _ := newReceiver(t, e, p, func(c *receiver.Config) { c.Window = window })
	body := `{"n":1}`
	for _, s := range []struct {
		name, path string
		hdr        http.Header
		stored     bool
	}{
		{"github off: genuine", "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "a"), true},
		{"github off: fresh id published", "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "b"), true},
		{"hmac on: genuine", "/hooks/acme/sig", hdr("X-Sig", hmacHex(hmacSecret, body), "X-Id", "a"), true},
		{"hmac on: fresh id caught", "/hooks/acme/sig", hdr("X-Sig", hmacHex(hmacSecret, body), "X-Id", "b"), false},
	} {
		before := e.lastSeq(t)
		rec := do(r, http.MethodPost, s.path, s.hdr, body)
		if rec.Code != http.StatusAccepted || (e.lastSeq(t) > before) != s.stored {
			t.Fatalf("%s: %d %s, stored %v, want %v", s.name, rec.Code, rec.Body.String(), e.lastSeq(t) > before, s.stored)
		}
	}
	// replay_guard only where the signature covers the body alone.
	src := mustSources(t, `sources: {sv: {dedupe: svix, verify: {scheme: svix, replay_guard: on}}}`)
	if err := receiver.CheckVerify(src); err == nil || !strings.Contains(err.Error(), "sources.sv.verify.replay_guard: only for the schemes") {
		t.Errorf("CheckVerify: %v", err)
	}
	// Default: github and shopify keyed by a header are guarded; hmac is not; a body key needs none.
	p = policyOf(t, testSources+"  ghj: {dedupe: {json: id}, verify: github}\n", "DEDUPE_INGEST_SECRET_GHJ="+ghOld)
	if got := strings.Join(p.Guarded(), ","); got != "gh,shop" {
		t.Errorf("Guarded() = %s, want gh,shop", got)
	}
}

// A guard that cannot reach the window answers 503 with Retry-After, so that the provider retries, and publishes
// nothing: a delivery is never published unguarded.
func TestReplayGuardUnavailable(t *testing.T) {
	e := startJS(t, true)
	window, js := openWindow(t, e, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Window = window; c.PublishTimeout = 500 * time.Millisecond })
	js.Conn().Close() // the window's connection: the input stream's stays up
	body := `{"n":2}`
	rec := do(r, http.MethodPost, "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "d-1"), body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
	if !strings.Contains(rec.Body.String(), "replay guard") {
		t.Errorf("answer %q", rec.Body.String())
	}
	if got := e.lastSeq(t); got != 0 {
		t.Fatalf("stored %d envelopes unguarded", got)
	}
	// A source the guard does not cover is still served.
	if rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), body); rec.Code != http.StatusAccepted {
		t.Fatalf("unguarded source: %d %s", rec.Code, rec.Body.String())
	}
}

// TestReplayGuardIDlessRetryAfterFailedPublish: a guarded delivery without an id won the guard's claim, then its
// publish failed (503). The provider's retry is the same delivery, but with no id the guard cannot tell it from a
// replay: left in place, the claim made the retry a replay (202, never published) and the delivery was lost. The
// guard's claim is released when the publish fails, so the retry is published.
func TestReplayGuardIDlessRetryAfterFailedPublish(t *testing.T) {
	e := startJS(t, false) // no input stream: the first publish fails
	window, _ := openWindow(t, e, false)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Window = window; c.PublishTimeout = 500 * time.Millisecond })
	body := `{"n":3}`
	h := hdr("X-Hub-Signature-256", githubSig(ghOld, body))
	if rec := do(r, http.MethodPost, "/hooks/acme/gh", h, body); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("without the input stream: %d %s", rec.Code, rec.Body.String())
	}
	e.createStream(t, "INGEST", "ingest.>")
	rec := do(r, http.MethodPost, "/hooks/acme/gh", h, body)
	if rec.Code != http.StatusAccepted || !strings.HasPrefix(rec.Body.String(), "accepted:") {
		t.Fatalf("the provider's retry: %d %s", rec.Code, rec.Body.String())
	}
	if got := e.lastSeq(t); got != 1 {
		t.Fatalf("INGEST holds %d envelopes, want the retry's 1", got)
	}
}
