package receiver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// Every answer of the hook route, against a real nats-server: status, what is stored in INGEST, and the one
// Ingest-Verified the receiver sets.
func TestReceiverAnswers(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) {
		c.MaxBody = 4096
		c.MaxHeaderBytes = 2048
	})
	now := time.Now()
	body := `{"id":"evt_1","zen":"Design for failure."}`
	big := strings.Repeat("x", 4097)
	swHdr := func(secret string) http.Header {
		return hdr("Webhook-Id", "msg_1", "Webhook-Timestamp", itoa(now.Unix()), "Webhook-Signature", standardSig(secret, "msg_1", now, body))
	}
	type tc struct {
		name     string
		method   string
		path     string
		hdr      http.Header
		body     string
		chunked  bool
		status   int
		verified string // "" when nothing may be stored, else the stored Ingest-Verified
		subject  string
		check    func(t *testing.T, rec *httptest.ResponseRecorder)
	}
	cases := []tc{
		{name: "github, old secret", path: "/hooks/acme/gh", hdr: hdr("X-Hub-Signature-256", githubSig(ghOld, body)), body: body,
			status: 202, verified: "true", subject: "ingest.acme.gh"},
		{name: "github, new secret (rotation)", path: "/hooks/globex/gh", hdr: hdr("X-Hub-Signature-256", githubSig(ghNew, body)), body: body,
			status: 202, verified: "true", subject: "ingest.globex.gh"},
		{name: "github, forged", path: "/hooks/acme/gh", hdr: hdr("X-Hub-Signature-256", githubSig("guess", body)), body: body, status: 401,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if rec.Header().Get("WWW-Authenticate") == "" || !strings.Contains(rec.Body.String(), "signature mismatch") {
					t.Errorf("401 answer: %v %q", rec.Header(), rec.Body.String())
				}
			}},
		{name: "github, body changed", path: "/hooks/acme/gh", hdr: hdr("X-Hub-Signature-256", githubSig(ghOld, body)), body: body + " ", status: 401},
		{name: "github, unsigned", path: "/hooks/acme/gh", body: body, status: 401},
		{name: "github, unsigned claiming Ingest-Verified: true", path: "/hooks/acme/gh",
			hdr: hdr("Ingest-Verified", "true"), body: body, status: 401},
		{name: "stripe, tenant acme", path: "/hooks/acme/st", hdr: hdr("Stripe-Signature", stripeSig(stAcme, now, body)), body: body,
			status: 202, verified: "true", subject: "ingest.acme.st"},
		{name: "stripe, forged: forwarded unverified", path: "/hooks/acme/st", hdr: hdr("Stripe-Signature", stripeSig("whsec_guess", now, body)),
			body: body, status: 202, verified: "false",
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if !strings.HasPrefix(rec.Body.String(), "accepted unverified: INGEST seq ") {
					t.Errorf("answer %q", rec.Body.String())
				}
			}},
		{name: "stripe, unsigned claiming Ingest-Verified: true (forwarded as false)", path: "/hooks/acme/st",
			hdr: hdr("Ingest-Verified", "true", "Ingest-Verified", "TRUE"), body: body, status: 202, verified: "false"},
		{name: "stripe, replayed 10 minutes later", path: "/hooks/acme/st",
			hdr: hdr("Stripe-Signature", stripeSig(stAcme, now.Add(-10*time.Minute), body)), body: body, status: 202, verified: "false"},
		{name: "stripe, a tenant without secrets", path: "/hooks/globex/st", hdr: hdr("Stripe-Signature", stripeSig(stAcme, now, body)),
			body: body, status: 404},
		{name: "verify none", path: "/hooks/acme/open", hdr: hdr("X-Id", "1", "Ingest-Verified", "false"), body: body,
			status: 202, verified: "true"},
		{name: "shopify", path: "/hooks/acme/shop", hdr: hdr("X-Shopify-Hmac-Sha256", shopifySig(shopSecret, body)), body: body,
			status: 202, verified: "true"},
		{name: "standard webhooks", path: "/hooks/acme/sw", hdr: swHdr(swSecretB64), body: body, status: 202, verified: "true"},
		{name: "standard webhooks, wrong key", path: "/hooks/acme/sw", hdr: swHdr("whsec_d3Jvbmc="), body: body, status: 401},
		{name: "hmac", path: "/hooks/acme/sig", hdr: hdr("X-Sig", hmacHex(hmacSecret, body)), body: body, status: 202, verified: "true"},
		{name: "empty body, signed", path: "/hooks/acme/gh", hdr: hdr("X-Hub-Signature-256", githubSig(ghOld, "")), status: 202, verified: "true"},

		{name: "undeclared source", path: "/hooks/acme/nope", body: body, status: 404},
		{name: "tenant with a dot", path: "/hooks/ac.me/gh", body: body, status: 404},
		{name: "tenant too long", path: "/hooks/" + strings.Repeat("a", 65) + "/gh", body: body, status: 404},
		{name: "tenant of 64", path: "/hooks/" + strings.Repeat("a", 64) + "/open", hdr: hdr("X-Id", "1"), body: body, status: 202, verified: "true"},
		{name: "escaped slash", path: "/hooks/acme%2Fx/gh", body: body, status: 404},
		{name: "extra segment", path: "/hooks/acme/gh/push", body: body, status: 404},
		{name: "trailing slash", path: "/hooks/acme/gh/", body: body, status: 404},
		{name: "no source", path: "/hooks/acme", body: body, status: 404},
		{name: "empty tenant", path: "/hooks//gh", body: body, status: 404},
		{name: "root", path: "/", body: body, status: 404},
		{name: "GET", method: http.MethodGet, path: "/hooks/acme/gh", status: 405,
			check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if rec.Header().Get("Allow") != "POST" {
					t.Errorf("Allow %q", rec.Header().Get("Allow"))
				}
			}},
		{name: "PUT", method: http.MethodPut, path: "/hooks/acme/open", body: body, status: 405},
		{name: "GET of an undeclared source", method: http.MethodGet, path: "/hooks/acme/nope", status: 404},
		{name: "body over the limit", path: "/hooks/acme/open", hdr: hdr("X-Id", "1"), body: big, status: 413},
		{name: "chunked body over the limit", path: "/hooks/acme/open", hdr: hdr("X-Id", "1"), body: big, chunked: true, status: 413},
		{name: "chunked body at the limit", path: "/hooks/acme/open", hdr: hdr("X-Id", "1"), body: big[1:], chunked: true, status: 202, verified: "true"},
		{name: "headers over the limit", path: "/hooks/acme/open", hdr: hdr("X-Big", strings.Repeat("h", 2030)), body: body, status: 431},
		{name: "dropped headers do not count", path: "/hooks/acme/open", hdr: hdr("Authorization", strings.Repeat("h", 2000), "Nats-Big", strings.Repeat("n", 2000)),
			body: body, status: 202, verified: "true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.lastSeq(t)
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, "http://ingest.test"+c.path, strings.NewReader(c.body))
			if c.chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(strings.NewReader(c.body))
			}
			for k, v := range c.hdr {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body.String())
			}
			if got := rec.Header().Get("Content-Type"); got != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", got)
			}
			after := e.lastSeq(t)
			if c.verified == "" {
				if after != before {
					t.Fatalf("stored %d envelopes for a %d", after-before, c.status)
				}
			} else {
				if after != before+1 {
					t.Fatalf("stored %d envelopes, want 1", after-before)
				}
				m := e.msg(t, after)
				if got := verifiedValues(m.Header); !slices.Equal(got, []string{c.verified}) {
					t.Errorf("Ingest-Verified %q, want exactly [%s]", got, c.verified)
				}
				if c.subject != "" && m.Subject != c.subject {
					t.Errorf("subject %q, want %q", m.Subject, c.subject)
				}
				if !bytes.Equal(m.Data, []byte(c.body)) {
					t.Errorf("body %q, want %q", m.Data, c.body)
				}
			}
			if c.check != nil {
				c.check(t, rec)
			}
		})
	}
}

// verifiedValues are the values of every header named Ingest-Verified in any letter case.
func verifiedValues(h map[string][]string) []string {
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, contract.HeaderVerified) {
			out = append(out, v...)
		}
	}
	return out
}

// What a delivery's headers become: end-to-end headers kept with every value, hop-by-hop headers, credentials and
// every reserved name (any letter case) dropped; a client's Nats-Msg-Id never reaches the stream's duplicate
// window.
func TestReceiverHeaderFiltering(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	h := http.Header{
		"Connection":                  {"keep-alive, X-Hop-One", "x-hop-two"},
		"X-Hop-One":                   {"1"},
		"X-Hop-Two":                   {"2"},
		"Keep-Alive":                  {"timeout=5"},
		"Proxy-Authorization":         {"Basic cHJveHk6cHc="},
		"Proxy-Connection":            {"keep-alive"},
		"Te":                          {"trailers"},
		"Trailer":                     {"X-Checksum"},
		"Transfer-Encoding":           {"chunked"},
		"Upgrade":                     {"h2c"},
		"Expect":                      {"100-continue"},
		"Authorization":               {"Bearer hunter2"},
		"Cookie":                      {"session=abc"},
		"Nats-Msg-Id":                 {"client-chosen"},
		"Nats-Expected-Stream":        {"ELSEWHERE"},
		"nats-expected-last-sequence": {"5"},
		"Dedupe-Key":                  {"forged"},
		"dedupe-status":               {"unique"},
		"Ingest-Verified":             {"true"},
		"INGEST-VERIFIED":             {"true"},
		"ingest-verified":             {"TRUE"},
		"Ingest-Anything":             {"x"},
		"Idempotency-Key":             {"kept: the worker replaces it"},
		"X-Multi":                     {"a", "b"},
		"X-Empty":                     {""},
		"Content-Type":                {"application/json"},
		"X-Id":                        {"42"},
		"User-Agent":                  {"GitHub-Hookshot/abc"},
	}
	body := `{"n":1}`
	for i := range 2 {
		rec := do(r, http.MethodPost, "/hooks/acme/open", h, body)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("post %d: %d %s", i, rec.Code, rec.Body.String())
		}
	}
	if got := e.lastSeq(t); got != 2 {
		t.Fatalf("INGEST holds %d envelopes: the client's Nats-Msg-Id collapsed them", got)
	}
	m := e.msg(t, 2)
	want := map[string][]string{
		"X-Multi":              {"a", "b"},
		"X-Empty":              {""},
		"Content-Type":         {"application/json"},
		"X-Id":                 {"42"},
		"User-Agent":           {"GitHub-Hookshot/abc"},
		"Idempotency-Key":      {"kept: the worker replaces it"},
		"Ingest-Verified":      {"true"},
		"Nats-Expected-Stream": {"INGEST"}, // the receiver's own
	}
	var names []string
	for k := range m.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(m.Header) != len(want) {
		t.Errorf("stored headers %v, want %v", names, want)
	}
	for k, v := range want {
		if !slices.Equal(m.Header[k], v) {
			t.Errorf("header %s: %q, want %q (stored: %v)", k, m.Header[k], v, names)
		}
	}
}

// Over a real HTTP connection: Go's server moves Host and Transfer-Encoding out of the header map; neither is
// published, and a chunked body arrives whole.
func TestReceiverOverHTTP(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	srv := httptest.NewServer(r)
	defer srv.Close()
	body := strings.Repeat(`{"chunk":true}`, 1000)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/acme/gh", io.NopCloser(strings.NewReader(body))) // no length: chunked
	req.Header.Set("X-Hub-Signature-256", githubSig(ghNew, body))
	req.Header.Set("X-GitHub-Delivery", "72d3162e")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(answer) != "accepted: INGEST seq 1\n" {
		t.Fatalf("%d %q", resp.StatusCode, answer)
	}
	m := e.msg(t, 1)
	if string(m.Data) != body {
		t.Fatalf("body of %d bytes stored as %d", len(body), len(m.Data))
	}
	for k := range m.Header {
		if strings.EqualFold(k, "Host") || strings.EqualFold(k, "Transfer-Encoding") {
			t.Errorf("stored %s", k)
		}
	}
	// Go's canonical form of the name; the worker matches header names ignoring case.
	if m.Header.Get("X-Github-Delivery") != "72d3162e" {
		t.Errorf("headers %v", m.Header)
	}
}

// The operations routes.
func TestReceiverOpsRoutes(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodGet, "/healthz", 200, "ok\n"},
		{http.MethodHead, "/healthz", 200, ""},
		{http.MethodGet, "/readyz", 200, "ready\n"},
		{http.MethodPost, "/readyz", 405, ""},
		{http.MethodGet, "/metrics", 200, "dedupeworker_ingest_requests_total"},
	} {
		rec := do(r, c.method, c.path, nil, "")
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s %s: %d %q", c.method, c.path, rec.Code, rec.Body.String())
		}
	}
	// Without a Gatherer there is no /metrics.
	r2, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Gatherer = nil })
	if rec := do(r2, http.MethodGet, "/metrics", nil, ""); rec.Code != 404 {
		t.Errorf("/metrics without a Gatherer: %d", rec.Code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
