package keys_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
)

func TestSourcesVerifyBlock(t *testing.T) {
	src, err := keys.LoadSources([]byte(`
sources:
  github: {dedupe: github, verify: github}
  stripe: {dedupe: stripe, verify: {scheme: stripe, tolerance: 10m}, on_invalid: forward}
  orders: {dedupe: {json: id}, verify: {scheme: hmac, header: X-Signature, algorithm: sha256, encoding: hex, prefix: "sha256="}}
  legacy: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]keys.VerifySpec{
		"github": {Scheme: "github", Line: 3},
		"stripe": {Scheme: "stripe", Tolerance: 10 * time.Minute, Line: 4},
		"orders": {Scheme: "hmac", Header: "X-Signature", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256=", Line: 5},
	}
	if len(src.Verify) != len(want) {
		t.Fatalf("Verify = %+v", src.Verify)
	}
	for id, v := range want {
		if src.Verify[id] != v {
			t.Errorf("Verify[%s] = %+v, want %+v", id, src.Verify[id], v)
		}
	}
	if src.OnInvalid["stripe"] != keys.OnInvalidForward || len(src.OnInvalid) != 1 {
		t.Errorf("OnInvalid = %v", src.OnInvalid)
	}
	for _, c := range []struct{ doc, want string }{
		{`sources: {a: {verify: {scheme: github, secret: s3cr3t}}}`, "sources.a.verify.secret: secrets are never read from the sources file"},
		{`sources: {a: {dedupe: github, secret: s3cr3t}}`, "sources.a.secret: secrets are never read from the sources file: dedupeworker ingest reads each source's from DEDUPE_INGEST_SECRET_<SOURCE>"},
		{`sources: {a: {verify: {header: X}}}`, "sources.a.verify: scheme is required"},
		{`sources: {a: {verify: {scheme: stripe, tolerance: soon}}}`, `sources.a.verify.tolerance: must be a positive duration such as 5m, got "soon"`},
		{`sources: {a: {verify: {scheme: stripe, tolerance: -5m}}}`, `sources.a.verify.tolerance: must be a positive duration such as 5m, got "-5m"`},
		{`sources: {a: {verify: {scheme: stripe, tolerance: whsec_MfKQ9r8GKYqrTwjUPD8ILP}}}`, `sources.a.verify.tolerance: must be a positive duration such as 5m, got 28 characters (not shown`},
		{`sources: {a: {verify: {scheme: hmac, algo: md5}}}`, "sources.a.verify.algo: unknown field"},
		{`sources: {a: {verify: [github]}}`, "sources.a.verify: must be a scheme name or an object"},
		{`sources: {a: {on_invalid: drop}}`, `sources.a.on_invalid: must be reject or forward, got "drop"`},
	} {
		_, err := keys.LoadSources([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.doc, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error shows the secret: %v", c.doc, err)
		}
	}
}

// A verify block knows the line it is declared on, in YAML and in JSON alike, so that the receiver's errors about
// it can point there.
func TestSourcesVerifyBlockLine(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      map[string]int
	}{
		{"yaml blocks", "# sources\nsources:\n  github: {dedupe: github, verify: github}\n  orders:\n    dedupe: {json: id}\n\n    verify:\n      scheme: hmac\n      header: X-Sig\n",
			map[string]int{"github": 3, "orders": 7}},
		{"yaml with CRLF", "sources:\r\n  a:\r\n    verify: none\r\n", map[string]int{"a": 3}},
		{"json on one line", `{"sources": {"a": {"verify": "none"}, "b": {"verify": {"scheme": "github"}}}}`, map[string]int{"a": 1, "b": 1}},
		{"json over lines", "{\n  \"sources\": {\n    \"a\": {\"verify\": \"none\"},\n    \"b\": {\n      \"dedupe\": \"github\",\n      \"verify\": {\"scheme\": \"github\"}\n    }\n  }\n}\n",
			map[string]int{"a": 3, "b": 6}},
	} {
		src, err := keys.LoadSources([]byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for id, line := range c.want {
			if got := src.Verify[id].Line; got != line {
				t.Errorf("%s: sources.%s.verify on line %d, want %d", c.name, id, got, line)
			}
		}
	}
}

// A verify block's replay_guard switch: on or off, also written as a YAML or JSON boolean; anything else is an
// error naming the field.
func TestSourcesVerifyReplayGuard(t *testing.T) {
	src, err := keys.LoadSources([]byte(`
sources:
  a: {verify: {scheme: github, replay_guard: off}}
  b: {verify: {scheme: shopify, replay_guard: "on"}}
  c: {verify: {scheme: hmac, header: X-Sig, replay_guard: true}}
  d: {verify: {scheme: github, replay_guard: false}}
  e: {verify: github}
`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a": keys.ReplayGuardOff, "b": keys.ReplayGuardOn, "c": keys.ReplayGuardOn, "d": keys.ReplayGuardOff, "e": ""} {
		if got := src.Verify[id].ReplayGuard; got != want {
			t.Errorf("sources.%s.verify.replay_guard = %q, want %q", id, got, want)
		}
	}
	for _, doc := range []string{
		`sources: {a: {verify: {scheme: github, replay_guard: maybe}}}`,
		`sources: {a: {verify: {scheme: github, replay_guard: [on]}}}`,
	} {
		_, err := keys.LoadSources([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "sources.a.verify.replay_guard: must be on or off") {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
