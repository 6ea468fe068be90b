package natsconn_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

// A malformed URL is refused with its reason, never retried; a well-formed one passes whether or not its host
// resolves. Before CheckURL, `htp://x`, `nats://:99999` and `nats://a:4222,,` were dialled (and retried until the
// connect timeout), and url.Parse's own error quoted the password of the URL.
func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		url, want string // want "": valid
	}{
		{"nats://127.0.0.1:4222", ""},
		{"nats://nats.example:4222, tls://nats2.example:4443", ""},
		{"localhost:4222", ""},
		{"nats://app:hunter2@nats.example", ""},
		{"nats://tok@nats.example:4222/", ""},
		{"nats://[::1]:4222", ""},
		{"nats://:4222", ""}, // this machine, as Go dials it (an embedded server listening on :4222)
		{"wss://nats.example/ws?x=1", ""},
		{"nats://nosuchhost.invalid:4222", ""},

		{"nats://exa mple:4222", `"nats://exa mple:4222": invalid character " " in host name`},
		{"nats://host:port", `"nats://host:port": invalid port ":port" after host`},
		{"nats://:99999", `"nats://:99999": port 99999 is not between 1 and 65535`},
		{"nats://x:0", `"nats://x:0": port 0 is not between 1 and 65535`},
		{"htp://x", `"htp://x": scheme "htp" is not one of nats, tls, ws, wss`},
		{"nats://a:4222,,", `URL 2 of 3 is empty (a stray comma?)`},
		{"nats://a:4222, ,nats://b:4222", `URL 2 of 3 is empty (a stray comma?)`},
		{"nats://a:4222,nats://b:x", `URL 2 of 2 ("nats://b:x"): invalid port ":x" after host`},
		{"nats://", `"nats://": no host`},
		{"nats://a:4222/path", `"nats://a:4222/path": a nats URL has no path, query or fragment (only ws and wss URLs do)`},
		{"nats://a:4222,ws://b:8080", "mixes websocket (ws, wss) and plain (nats, tls) URLs: the client connects with one kind"},
		{"nats://app:hun ter2@x:4222", `"nats://[redacted]@x:4222": invalid userinfo`},
		{"nats://app:hunter2@exa mple:4222", `"nats://[redacted]@exa mple:4222": invalid character " " in host name`},
	} {
		err := natsconn.CheckURL(c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.url, err)
		case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, natsconn.ErrURL)):
			t.Errorf("%q:\n got  %v\n want %s", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", c.url, err)
		}
	}
}

// ConnectContext refuses a malformed URL before any attempt, however long it may retry; the error says where the
// URL came from.
func TestConnectMalformedURL(t *testing.T) {
	start := time.Now()
	_, err := natsconn.Connect(natsconn.Config{URL: "htp://x", Origin: "url from DEDUPE_NATS_URL", RetryFor: time.Minute})
	want := `natsconn: url: "htp://x": scheme "htp" is not one of nats, tls, ws, wss (url from DEDUPE_NATS_URL)`
	if err == nil || err.Error() != want || !errors.Is(err, natsconn.ErrURL) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %s: retried", d)
	}
}
