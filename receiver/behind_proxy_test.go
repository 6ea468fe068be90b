package receiver_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// Behind a reverse proxy (net/http/httputil.ReverseProxy, which removes the headers a client's Connection header
// lists before forwarding), a client's Connection list cannot turn a captured genuine delivery into a new event
// nor smuggle a header into the envelope: a GitHub replay under a fresh id is held back by the replay guard whether
// or not the proxy strips that id (the guard knows the signed body); a signed id or a signature the proxy strips
// fails verification; control headers are dropped by the receiver whatever the proxy forwards.
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
		{"github, replay under a fresh id the proxy strips: held by the replay guard", "/hooks/acme/gh",
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
	// The envelope of the open source: every spelling of a control header counted as one name.
	m := e.msg(t, e.lastSeq(t))
	values := map[string][]string{}
	for name, vals := range m.Header {
		values[foldName(name)] = append(values[foldName(name)], vals...)
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"Nats-Msg-Id", nil},
		{"Dedupe-Key", nil},
		{"Ingest-Verified", []string{"true"}}, // the receiver's own, one: verify: none accepts the delivery
	} {
		if got := values[foldName(c.name)]; !slices.Equal(got, c.want) {
			t.Errorf("the envelope's %s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := values[foldName("Nats-Expected-Stream")]; len(got) > 1 || len(got) == 1 && got[0] != "INGEST" {
		t.Errorf("the envelope's Nats-Expected-Stream: %q", got)
	}
}
