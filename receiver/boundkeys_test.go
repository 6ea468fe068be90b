package receiver_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// presetPolicy is the policy with no sources document: every preset a source, served with the secrets of environ.
func presetPolicy(tb testing.TB, environ ...string) *receiver.Policy {
	tb.Helper()
	src := keys.PresetSources()
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: environ, Sources: src.IDs()})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, FromPresets: true, Secrets: secrets})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// workerKey is the key the worker computes for a stored envelope under a preset's spec.
func workerKey(tb testing.TB, preset string, h map[string][]string, body []byte) string {
	tb.Helper()
	spec, err := keys.ParseSpec([]byte(preset))
	if err != nil {
		tb.Fatal(err)
	}
	k, _ := keys.Extractor{}.Extract(spec, keys.NATSHeaders(h), body)
	return k
}

// Every documented delivery form of a verified source gives the worker the key the provider documents, also with
// no sources document: Svix's unbranded webhook-* names, Shopify Events' unprefixed Shopify-* names, and the
// Standard Webhooks form whose id a client's Connection header lists. Each copy is keyed on the provider's id, so
// two copies are one event. Before the key was bound: no key for the first two (svix-id and X-Shopify-Webhook-Id
// absent), and the Connection list removed Webhook-Id after verification.
func TestBoundKeyDocumentedForms(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, presetPolicy(t,
		"DEDUPE_INGEST_SECRET_SVIX="+swSecretB64,
		"DEDUPE_INGEST_SECRET_SHOPIFY="+shopSecret,
		"DEDUPE_INGEST_SECRET_STANDARD_WEBHOOKS="+swSecretB64,
		"DEDUPE_INGEST_SECRET_GITHUB="+ghOld,
	))
	now := time.Now()
	body := `{"type":"invoice.paid","data":{"id":"in_1"}}`
	ts := itoa(now.Unix())
	for _, c := range []struct {
		name, source, preset, id string
		hdr                      http.Header
	}{
		{"svix, unbranded webhook-* names", "svix", "svix", "msg_2Lh9",
			hdr("Webhook-Id", "msg_2Lh9", "Webhook-Timestamp", ts, "Webhook-Signature", standardSig(swSecretB64, "msg_2Lh9", now, body))},
		{"svix, svix-* names", "svix", "svix", "msg_7Qa1",
			hdr("Svix-Id", "msg_7Qa1", "Svix-Timestamp", ts, "Svix-Signature", standardSig(swSecretB64, "msg_7Qa1", now, body))},
		{"shopify events, unprefixed names", "shopify", "shopify", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
			hdr("Shopify-Hmac-Sha256", shopifySig(shopSecret, body), "Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
				"Shopify-Topic", "orders/create")},
		{"shopify webhooks, X- names", "shopify", "shopify", "0f2c41e8",
			hdr("X-Shopify-Hmac-Sha256", shopifySig(shopSecret, body), "X-Shopify-Webhook-Id", "0f2c41e8")},
		{"standard webhooks, Connection lists the id", "standard_webhooks", "standard_webhooks", "msg_c0nn",
			hdr("Webhook-Id", "msg_c0nn", "Webhook-Timestamp", ts, "Webhook-Signature", standardSig(swSecretB64, "msg_c0nn", now, body),
				"Connection", "Webhook-Id, webhook-signature")},
		{"github, Connection lists the delivery id", "github", "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
				"Connection", "X-GitHub-Delivery")},
	} {
		t.Run(c.name, func(t *testing.T) {
			for copyN := range 2 {
				before := e.lastSeq(t)
				rec := do(r, http.MethodPost, "/hooks/acme/"+c.source, c.hdr, body)
				if rec.Code != http.StatusAccepted {
					t.Fatalf("copy %d: %d %s", copyN+1, rec.Code, rec.Body.String())
				}
				m := e.msg(t, before+1)
				if got := workerKey(t, c.preset, m.Header, m.Data); got != c.id {
					t.Fatalf("copy %d: the worker's key is %q, want the provider's id %q (stored headers %v)", copyN+1, got, c.id, m.Header)
				}
			}
		})
	}
}

// A signature the verifier checked under one header set, with another id under a name the key reads, is refused:
// the id is not what was signed (Svix: a genuine webhook-* delivery replayed with a chosen svix-id; Shopify: two
// different ids under its two names; GitHub: two values of X-GitHub-Delivery). Nothing is stored, and the answer
// names the headers, never their values. Before, each forged id was stored verified: a new event per id.
func TestBoundKeyConflictingIDRefused(t *testing.T) {
	e := startJS(t, true)
	r, logs := newReceiver(t, e, presetPolicy(t,
		"DEDUPE_INGEST_SECRET_SVIX="+swSecretB64,
		"DEDUPE_INGEST_SECRET_SHOPIFY="+shopSecret,
		"DEDUPE_INGEST_SECRET_GITHUB="+ghOld,
	))
	now := time.Now()
	body := `{"type":"invoice.paid"}`
	ts := itoa(now.Unix())
	genuine := standardSig(swSecretB64, "msg_real", now, body)
	for _, c := range []struct {
		name, source string
		hdr          http.Header
	}{
		{"svix, webhook-* signed, svix-id chosen", "svix",
			hdr("Webhook-Id", "msg_real", "Webhook-Timestamp", ts, "Webhook-Signature", genuine, "Svix-Id", "forged_1")},
		{"svix, webhook-* signed, incomplete svix-* set with another id", "svix",
			hdr("Webhook-Id", "msg_real", "Webhook-Timestamp", ts, "Webhook-Signature", genuine, "Svix-Id", "forged_2", "Svix-Timestamp", ts)},
		{"svix, svix-* signed, webhook-id chosen", "svix",
			hdr("Svix-Id", "msg_real", "Svix-Timestamp", ts, "Svix-Signature", genuine, "Webhook-Id", "forged_3")},
		{"svix, svix_id spelt with an underscore", "svix",
			hdr("Webhook-Id", "msg_real", "Webhook-Timestamp", ts, "Webhook-Signature", genuine, "Svix_id", "forged_4")},
		{"shopify, two names, two ids", "shopify",
			hdr("Shopify-Hmac-Sha256", shopifySig(shopSecret, body), "Shopify-Webhook-Id", "id-a", "X-Shopify-Webhook-Id", "id-b")},
		{"github, two delivery ids", "github",
			hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "d-1", "X-GitHub-Delivery", "d-2")},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.lastSeq(t)
			rec := do(r, http.MethodPost, "/hooks/acme/"+c.source, c.hdr, body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", rec.Code, rec.Body.String())
			}
			if got := e.lastSeq(t); got != before {
				t.Fatalf("stored: INGEST went from %d to %d", before, got)
			}
			for _, v := range []string{"forged", "id-a", "id-b", "d-1", "d-2", "msg_real"} {
				if strings.Contains(rec.Body.String(), v) {
					t.Errorf("the answer quotes a header value %q: %s", v, rec.Body.String())
				}
			}
		})
	}
	text := metricsText(t, r)
	if got := metricValue(text, requests("svix", receiver.OutcomeIDConflict)); got != 4 {
		t.Errorf("svix id_conflict = %v, want 4", got)
	}
	if !strings.Contains(logs.String(), "another id than the verified one") {
		t.Errorf("no log line: %s", logs.String())
	}
}

// A Standard Webhooks delivery signed only with v1a (Ed25519) is received with the sender's public key (whpk_) as
// the source's secret, and keyed on its signed id. Before, it was answered 401.
func TestReceiverStandardWebhooksV1a(t *testing.T) {
	e := startJS(t, true)
	priv := ed25519.NewKeyFromSeed([]byte("standard-webhooks-ed25519-seed-1"))
	pub := "whpk_" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	r, _ := newReceiver(t, e, presetPolicy(t, "DEDUPE_INGEST_SECRET_STANDARD_WEBHOOKS="+swSecretB64+","+pub))
	now := time.Now()
	body := `{"type":"user.created"}`
	ts := itoa(now.Unix())
	sig := "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("msg_ed."+ts+"."+body)))
	rec := do(r, http.MethodPost, "/hooks/acme/standard_webhooks", hdr("Webhook-Id", "msg_ed", "Webhook-Timestamp", ts, "Webhook-Signature", sig), body)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	if got := workerKey(t, "standard_webhooks", e.msg(t, 1).Header, []byte(body)); got != "msg_ed" {
		t.Errorf("key %q", got)
	}
	forged := "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("msg_other."+ts+"."+body)))
	if rec := do(r, http.MethodPost, "/hooks/acme/standard_webhooks", hdr("Webhook-Id", "msg_ed", "Webhook-Timestamp", ts, "Webhook-Signature", forged), body); rec.Code != http.StatusUnauthorized {
		t.Fatalf("another id's signature: %d %s", rec.Code, rec.Body.String())
	}
}

// A key on a header that is not the id the scheme names is left as sent (Shopify's X-Shopify-Event-Id differs
// from the webhook id on every delivery), and a key on another name of the same signed id is bound
// (standard_webhooks keyed by the svix preset).
func TestBoundKeyOtherHeaders(t *testing.T) {
	e := startJS(t, true)
	p := policyOf(t, `sources:
  shop: {dedupe: {header: X-Shopify-Event-Id}, verify: shopify}
  sw:   {dedupe: svix, verify: standard_webhooks}
`)
	r, _ := newReceiver(t, e, p)
	body := `{"id":1}`
	rec := do(r, http.MethodPost, "/hooks/acme/shop", hdr("X-Shopify-Hmac-Sha256", shopifySig(shopSecret, body),
		"X-Shopify-Webhook-Id", "w-1", "X-Shopify-Event-Id", "e-1"), body)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("shopify with an event id: %d %s", rec.Code, rec.Body.String())
	}
	if got := workerKey(t, "{header: X-Shopify-Event-Id}", e.msg(t, 1).Header, []byte(body)); got != "e-1" {
		t.Errorf("shopify key %q, want e-1", got)
	}
	now := time.Now()
	rec = do(r, http.MethodPost, "/hooks/acme/sw", hdr("Webhook-Id", "msg_s", "Webhook-Timestamp", itoa(now.Unix()),
		"Webhook-Signature", standardSig(swSecretB64, "msg_s", now, body)), body)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("standard webhooks keyed by svix-id: %d %s", rec.Code, rec.Body.String())
	}
	if got := workerKey(t, "svix", e.msg(t, 2).Header, []byte(body)); got != "msg_s" {
		t.Errorf("svix-id key %q, want msg_s", got)
	}
}
