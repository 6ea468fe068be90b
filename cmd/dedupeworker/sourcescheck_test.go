package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// `sources check` refuses what ingest refuses in a sources file, with ingest's own error: a verify block with a
// scheme or an option the receiver does not take. Before, `verify: githb` and `algorithm: md5` passed the check
// (exit 0) and stopped ingest (exit 2), whose error named neither the file nor the line.
func TestSourcesCheckVerifyBlocks(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DEDUPE_SOURCES", "")
	t.Setenv("DEDUPE_INGEST_SECRETS_DIR", "")
	// Should ingest get as far as connecting, it fails with status 1 (and the test says so).
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	for _, c := range []struct {
		name, doc string
		want      []string // after the origin; "" each: valid
	}{
		{"misspelt scheme", "# acme\nsources:\n  github: {dedupe: github, verify: githb}\n",
			[]string{"line 3: sources.github.verify.scheme: not a known scheme (want one of github, hmac, none, shopify, standard_webhooks, stripe, svix; got \"githb\")"}},
		{"md5", "sources:\n  orders:\n    dedupe: {json: data.id}\n    verify:\n      scheme: hmac\n      header: X-Signature\n      algorithm: md5\n",
			[]string{"line 4: sources.orders.verify.algorithm: not a known algorithm (want one of sha1, sha256, sha512; got \"md5\")"}},
		{"two faults, JSON", "{\n  \"sources\": {\n    \"gh\": {\"verify\": {\"scheme\": \"github\", \"tolerance\": \"1m\"}},\n    \"sig\": {\"verify\": \"hmac\"}\n  }\n}\n",
			[]string{"line 3: sources.gh.verify.tolerance: scheme github signs no timestamp", "line 4: sources.sig.verify.header: required for scheme hmac"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			want := func(origin string) string {
				var parts []string
				for _, w := range c.want {
					parts = append(parts, origin+": "+w)
				}
				return strings.Join(parts, "; ")
			}
			t.Setenv("DEDUPE_SOURCES_FILE", "")
			code, out, errOut := runCLI(t, "", "sources", "check", file)
			if code != 2 || out != "" || strings.TrimSpace(errOut) != "sources check: "+want(file) {
				t.Errorf("sources check: exit %d\nstdout %q\nstderr %q\nwant   %q", code, out, errOut, want(file))
			}
			t.Setenv("DEDUPE_SOURCES_FILE", file)
			for _, cmd := range [][]string{{"sources", "check"}, {"ingest"}} {
				code, out, errOut = runCLI(t, "", cmd...)
				if w := strings.Join(cmd, " ") + ": " + want("DEDUPE_SOURCES_FILE "+file); code != 2 || out != "" || strings.TrimSpace(errOut) != w {
					t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant   %q", cmd, code, out, errOut, w)
				}
			}
		})
	}
}

// The check shows the scheme ingest verifies each source with, and names the sources ingest would refuse for
// having no verify block; the worker, which reads no verify block, starts with them.
func TestSourcesCheckShowsVerify(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "sources:\n  github: {dedupe: github, verify: github}\n  stripe: {dedupe: stripe, verify: {scheme: stripe, tolerance: 10m}, on_invalid: forward}\n"+
		"  orders: {dedupe: {json: id}, verify: {scheme: hmac, header: X-Signature}}\n  open: {dedupe: {json: id}, verify: none}\n  legacy: {}\n")
	code, out, errOut := runCLI(t, "", "sources", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := map[string]string{"SOURCE": "VERIFY", "github": "github", "stripe": "stripe, on_invalid: forward", "orders": "hmac", "open": "none", "legacy": "-"}
	for _, l := range lines[1:7] {
		id := strings.Fields(l)[0]
		if w, ok := want[id]; !ok || !strings.HasSuffix(l, "  "+w) {
			t.Errorf("line %q: want it to end in %q", l, w)
		}
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("no line for %v:\n%s", want, out)
	}
	if !strings.Contains(out, "\nsources without a verify block (dedupeworker ingest refuses the file until each has one") || !strings.HasSuffix(out, ": [legacy]\n") {
		t.Errorf("no note of the source without a verify block:\n%s", out)
	}
}

// The check warns about verify/dedupe pairs that leave verified deliveries unkeyed, or keyed on a header the
// signature does not cover with the replay guard off; bound and guarded pairs pass without a word. Before, it
// said nothing about any pair.
func TestSourcesCheckWarnsKeyPairs(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", `sources:
  pay:  {dedupe: {header: X-Event-Id}, verify: stripe}
  gh:   {dedupe: github, verify: {scheme: github, replay_guard: off}}
  sig:  {dedupe: {header: X-Id}, verify: {scheme: hmac, header: X-Sig}}
  sig2: {dedupe: {header: X-Id}, verify: {scheme: hmac, header: X-Sig, replay_guard: on}}
  ord:  {dedupe: {json: id}, verify: {scheme: hmac, header: X-Sig, replay_guard: on}}
  sv:   {dedupe: svix, verify: svix}
  shop: {dedupe: shopify, verify: shopify}
  std:  {dedupe: svix, verify: standard_webhooks}
  open: {dedupe: {header: X-Id}, verify: none}
  cust: {dedupe: {header: X-Request-Id}, verify: svix}
  ev:   {dedupe: {header: X-Shopify-Event-Id}, verify: shopify}
`)
	code, out, errOut := runCLI(t, "", "sources", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	var warnings []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "warning: ") {
			warnings = append(warnings, l)
		}
	}
	want := []string{
		"warning: line 11: sources.cust: the key reads X-Request-Id, which the svix signature does not cover and which is not the id it signs (Svix-Id or Webhook-Id)",
		"warning: line 3: sources.gh: the key reads X-GitHub-Delivery, which the github signature does not cover, and replay_guard is off",
		"warning: line 6: sources.ord: replay_guard: on does nothing here",
		"warning: line 2: sources.pay: stripe deliveries carry their id in the body, in no header: the key reads X-Event-Id",
		"warning: line 4: sources.sig: the key reads X-Id, which the hmac signature does not cover, and replay_guard is off",
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings:\n%s\nwant %d", strings.Join(warnings, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(warnings[i], w) {
			t.Errorf("warning %d: %q, want it to start %q", i, warnings[i], w)
		}
	}
}

// A source verified with a timestamped scheme whose TTL is shorter than twice its tolerance: a captured delivery
// sent again after its event's claim expired still verifies and is published as a new event. Ingest refuses it at
// start and `sources check` refuses the file with the same error, naming the file, the line, where the TTL comes
// from, the tolerance and the minimum. With no sources document, a short DEDUPE_DEFAULT_TTL is a warning for the
// timestamped presets (ingest serves a preset only once it has a secret).
func TestSourcesCheckTTLShorterThanTolerance(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DEDUPE_SOURCES", "")
	t.Setenv("DEDUPE_INGEST_SECRETS_DIR", "")
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	for _, c := range []struct {
		name, doc, secret, defTTL, want string
	}{
		{"own ttl", "# billing\nsources:\n  pay: {dedupe: {preset: stripe, ttl: 1m}, verify: stripe}\n", "DEDUPE_INGEST_SECRET_PAY=whsec_stripe-test-secret", "72h",
			"line 3: sources.pay: its dedupe ttl (1m) is shorter than twice the stripe tolerance (5m): a signed delivery verifies for 10m, " +
				"so a captured one sent again after its event's claim expired would be published as a new event; set a ttl of at least 10m " +
				"(or shorten the verify tolerance)"},
		{"DEDUPE_DEFAULT_TTL", "sources:\n  msg: {dedupe: svix, verify: {scheme: svix, tolerance: 10m}}\n",
			"DEDUPE_INGEST_SECRET_MSG=whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5", "15m",
			"line 2: sources.msg: its TTL from DEDUPE_DEFAULT_TTL (15m) is shorter than twice the svix tolerance (10m): a signed delivery " +
				"verifies for 20m, so a captured one sent again after its event's claim expired would be published as a new event; give its " +
				"dedupe spec a ttl of at least 20m or raise DEDUPE_DEFAULT_TTL (or shorten the verify tolerance)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			name, value, _ := strings.Cut(c.secret, "=")
			t.Setenv(name, value)
			t.Setenv("DEDUPE_DEFAULT_TTL", c.defTTL)
			t.Setenv("DEDUPE_SOURCES_FILE", file)
			for _, cmd := range [][]string{{"sources", "check"}, {"ingest"}} {
				code, out, errOut := runCLI(t, "", cmd...)
				if w := strings.Join(cmd, " ") + ": DEDUPE_SOURCES_FILE " + file + ": " + c.want; code != 2 || out != "" || strings.TrimSpace(errOut) != w {
					t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant   %q", cmd, code, out, errOut, w)
				}
			}
		})
	}
	t.Run("presets", func(t *testing.T) {
		t.Setenv("DEDUPE_SOURCES_FILE", "")
		t.Setenv("DEDUPE_DEFAULT_TTL", "5m")
		code, out, errOut := runCLI(t, "", "sources", "check")
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
		for _, id := range []string{"stripe", "svix", "standard_webhooks"} {
			if !strings.Contains(out, "warning: preset source "+id+": its TTL from DEDUPE_DEFAULT_TTL (5m) is shorter than twice the "+id+" tolerance (5m)") {
				t.Errorf("no warning for %s:\n%s", id, out)
			}
		}
		if strings.Contains(out, "warning: preset source github") {
			t.Errorf("github signs no timestamp:\n%s", out)
		}
	})
}
