package receiver_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// Behind a reverse proxy (net/http/httputil.ReverseProxy, which removes the headers a client's Connection header
// lists before forwarding), a client's Connection list cannot turn a captured genuine delivery into a new event
// nor smuggle a header into the envelope: an id the proxy strips leaves a GitHub replay without an id, which the
// replay guard holds back; a signed id or a signature the proxy strips fails verification; control headers are
// dropped by the receiver whatever the proxy forwards.
func TestReceiverBehindProxyConnectionForging(t *testing.T) {
	e := startJS(t, true)
	window, _ := openWindow(t, e, false)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.Window = window })
	target, err := url.Parse("http://" + serveOn(t, r))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	addr := strings.TrimPrefix(proxy.URL, "http://")

	body := `{"action":"opened","number":8}`
	sig := "X-Hub-Signature-256: " + githubSig(ghOld, body)
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	swBody := `{"type":"invoice.paid"}`
	for _, s := range []struct {
		name, path string
		headers    []string
		body       string
		status     int
		stored     bool
	}{
		{"github, genuine", "/hooks/acme/gh", []string{sig, "X-GitHub-Delivery: d-genuine"}, body, http.StatusAccepted, true},
		{"github, replay whose fresh id the proxy strips", "/hooks/acme/gh",
			[]string{sig, "X-GitHub-Delivery: d-forged", "Connection: X-GitHub-Delivery"}, body, http.StatusAccepted, false},
		{"github, replay whose signature the proxy strips", "/hooks/acme/gh",
			[]string{sig, "X-GitHub-Delivery: d-forged-2", "Connection: X-Hub-Signature-256"}, body, http.StatusUnauthorized, false},
		{"standard webhooks, signed id the proxy strips", "/hooks/acme/sw",
			[]string{"Webhook-Id: msg_p1", "Webhook-Timestamp: " + ts, "Webhook-Signature: " + standardSig(swSecretB64, "msg_p1", now, swBody),
				"Connection: Webhook-Id"}, swBody, http.StatusUnauthorized, false},
		{"open source, control headers through the proxy", "/hooks/acme/open",
			[]string{"X-Id: p-1", "Nats-Msg-Id: forged", "Dedupe-Key: forged", "Ingest-Verified: true", "Ingest_Verified: true",
				"Nats-Expected-Stream: OTHER", "Connection: Ingest-Verified"}, "{}", http.StatusAccepted, true},
	} {
		before := e.lastSeq(t)
		status, answer := rawPost(t, addr, s.path, s.headers, s.body)
		if status != s.status {
			t.Fatalf("%s: answer %d %q, want %d", s.name, status, answer, s.status)
		}
		if stored := e.lastSeq(t) > before; stored != s.stored {
			t.Fatalf("%s: stored %v, want %v (%q)", s.name, stored, s.stored, answer)
		}
	}
	m := e.msg(t, e.lastSeq(t))
	for name, vals := range m.Header {
		if foldName(name) == foldName("Nats-Msg-Id") || foldName(name) == foldName("Dedupe-Key") ||
			(foldName(name) == foldName("Ingest-Verified") || foldName(name) == foldName("Nats-Expected-Stream")) && len(vals) != 1 {
			t.Errorf("the envelope holds %s %q", name, vals)
		}
	}
	if got := m.Header.Get("Nats-Expected-Stream"); got != "" && got != "INGEST" {
		t.Errorf("Nats-Expected-Stream %q", got)
	}
}
