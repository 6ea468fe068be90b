package receiver_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
)

// sdkDelivery is one delivery signed by a provider's own library (scripts/sdk/sign.mjs).
type sdkDelivery struct {
	Name    string            `json:"name"`
	Source  string            `json:"source"`
	ID      string            `json:"id"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
}

// Deliveries signed by the providers' libraries (standardwebhooks, svix, @octokit/webhooks-methods), read from the
// file DEDUPE_SDK_VECTORS names (`make sdk-check` writes it; skipped without it): each verifies, twice, and both
// copies are keyed on the provider's id under the preset of its source, with no sources document; a copy with a
// chosen svix-id beside a signed webhook-* set is refused.
func TestSDKSignedDeliveries(t *testing.T) {
	path := os.Getenv("DEDUPE_SDK_VECTORS")
	if path == "" {
		t.Skip("DEDUPE_SDK_VECTORS not set: make sdk-check signs deliveries with the providers' libraries (needs node)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ds []sdkDelivery
	if err := json.Unmarshal(data, &ds); err != nil || len(ds) == 0 {
		t.Fatalf("%s: %v (%d deliveries)", path, err, len(ds))
	}
	e := startJS(t, true)
	r, _ := newReceiver(t, e, presetPolicy(t,
		"DEDUPE_INGEST_SECRET_SVIX="+swSecretB64,
		"DEDUPE_INGEST_SECRET_STANDARD_WEBHOOKS="+swSecretB64,
		"DEDUPE_INGEST_SECRET_GITHUB=gh-sdk-secret-5e1f",
	))
	for _, d := range ds {
		h := http.Header{}
		for k, v := range d.Headers {
			h.Set(k, v)
		}
		for copyN := range 2 {
			before := e.lastSeq(t)
			rec := do(r, http.MethodPost, "/hooks/acme/"+d.Source, h, d.Body)
			if rec.Code != http.StatusAccepted {
				t.Fatalf("%s, copy %d: %d %s", d.Name, copyN+1, rec.Code, rec.Body.String())
			}
			if got := workerKey(t, d.Source, e.msg(t, before+1).Header, []byte(d.Body)); got != d.ID {
				t.Errorf("%s, copy %d: key %q, want %q", d.Name, copyN+1, got, d.ID)
			}
		}
		if d.Source == "svix" && h.Get("Webhook-Id") != "" {
			h.Set("Svix-Id", "chosen")
			if rec := do(r, http.MethodPost, "/hooks/acme/svix", h, d.Body); rec.Code != http.StatusBadRequest {
				t.Errorf("%s with a chosen svix-id: %d %s", d.Name, rec.Code, rec.Body.String())
			}
		}
	}
}
