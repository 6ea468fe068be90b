package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// The tests' own signers (GitHub: X-Hub-Signature-256; Stripe: Stripe-Signature), from the providers' docs.

func ingestGitHubSig(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func ingestStripeSig(secret string, ts time.Time, body string) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(t + "." + body))
	return "t=" + t + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

const (
	ingestGhOld = "gh-OLD-secret-3b9d"
	ingestGhNew = "gh-NEW-secret-c4e8"
	ingestStSec = "whsec_stripe-ACME-7a10"
)

func hookPost(t *testing.T, base, path, body string, kv ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
}

// waitDrained waits until the worker has finished every envelope in INGEST (work-queue: an acknowledged envelope
// is gone), so that DEDUPED holds all it will ever hold for them.
func waitDrained(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	natstest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, "INGEST")
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("INGEST still holds %d envelopes", info.State.Msgs)
		}
		return nil
	})
}

// ingestSetup starts a nats-server, the worker (`run`) and the receiver (`ingest`) in this process, both from
// the same settings, and waits until the receiver is ready (the worker created INGEST).
func ingestSetup(t *testing.T, srv *natstest.Server) (base string, js jetstream.JetStream, ingestLogs, workerLogs *natstest.Buffer, stopIngest func() error) {
	t.Helper()
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	port := natstest.FreePort(t)
	t.Setenv("DEDUPE_INGEST_ADDR", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("DEDUPE_SOURCES", `sources:
  gh:   {dedupe: github, verify: github}
  st:   {dedupe: stripe, verify: stripe, on_invalid: forward}
  open: {dedupe: {header: X-Id}, verify: none}
`)
	t.Setenv("DEDUPE_INGEST_SECRET_GH", ingestGhOld+","+ingestGhNew) // a rotation in progress
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "acme.st"), []byte(ingestStSec+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEDUPE_INGEST_SECRETS_DIR", dir)
	workerLogs, _ = startWorker(t)
	ingestLogs, stopIngest = runInBackground(t, "ingest")
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz", http.StatusOK)
	nc := natstest.Connect(t, srv.URL())
	js, _ = jetstream.New(nc)
	return base, js, ingestLogs, workerLogs, stopIngest
}

// Signed POSTs → ingest → INGEST → the worker → DEDUPED, with real servers: provider retries collapse into one
// event; a forged request cannot suppress the genuine event, neither rejected (401) nor forwarded unverified
// (on_invalid: forward); a client's Ingest-Verified: true is never trusted.
func TestIngestEndToEnd(t *testing.T) {
	srv := natstest.Run(t)
	base, js, ingestLogs, workerLogs, stopIngest := ingestSetup(t, srv)
	now := time.Now()
	expect := func(what string, got, want int, answer string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d, want %d: %s", what, got, want, answer)
		}
	}

	// GitHub: one delivery, retried twice by the provider (signed with the old secret, then the new one).
	d1 := `{"zen":"Design for failure.","hook_id":1}`
	for i, secret := range []string{ingestGhOld, ingestGhNew, ingestGhNew} {
		code, _, answer := hookPost(t, base, "/hooks/acme/gh", d1, "X-GitHub-Delivery", "d1", "X-Hub-Signature-256", ingestGitHubSig(secret, d1))
		expect(fmt.Sprintf("d1 delivery %d", i+1), code, 202, answer)
	}
	// A forgery of d2 comes first and is refused; the genuine d2 is published.
	d2 := `{"hook_id":2}`
	code, hdr, answer := hookPost(t, base, "/hooks/acme/gh", `{"forged":true}`, "X-GitHub-Delivery", "d2", "X-Hub-Signature-256", ingestGitHubSig("guessed", d2))
	expect("forged d2", code, 401, answer)
	if hdr.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate: %v", hdr)
	}
	code, _, answer = hookPost(t, base, "/hooks/acme/gh", d2, "X-GitHub-Delivery", "d2", "X-Hub-Signature-256", ingestGitHubSig(ingestGhNew, d2))
	expect("genuine d2", code, 202, answer)
	// An unsigned request claiming to be verified.
	code, _, answer = hookPost(t, base, "/hooks/acme/gh", `{"hook_id":3}`, "X-GitHub-Delivery", "d3", "Ingest-Verified", "true")
	expect("unsigned d3 claiming Ingest-Verified", code, 401, answer)

	// Stripe with on_invalid: forward: the forgery of evt_2 is stored unverified and cannot claim evt_2; the
	// genuine evt_2, delivered three times, is one event.
	evt2 := `{"id":"evt_2","type":"charge.succeeded"}`
	code, _, answer = hookPost(t, base, "/hooks/acme/st", `{"id":"evt_2","type":"charge.refunded"}`,
		"Stripe-Signature", ingestStripeSig("whsec_guessed", now, evt2), "Ingest-Verified", "true")
	expect("forged evt_2", code, 202, answer)
	if !strings.HasPrefix(answer, "accepted unverified: INGEST seq ") {
		t.Errorf("forged evt_2 answered %q", answer)
	}
	for i := range 3 {
		code, _, answer = hookPost(t, base, "/hooks/acme/st", evt2, "Stripe-Signature", ingestStripeSig(ingestStSec, now, evt2))
		expect(fmt.Sprintf("evt_2 delivery %d", i+1), code, 202, answer)
	}
	// An unsigned evt_3 with a client's Ingest-Verified: true, then the genuine one.
	evt3 := `{"id":"evt_3"}`
	code, _, answer = hookPost(t, base, "/hooks/acme/st", evt3, "Ingest-Verified", "true", "ingest-verified", "TRUE")
	expect("unsigned evt_3", code, 202, answer)
	code, _, answer = hookPost(t, base, "/hooks/acme/st", evt3, "Stripe-Signature", ingestStripeSig(ingestStSec, now, evt3))
	expect("genuine evt_3", code, 202, answer)
	// Tenant globex has no Stripe secret of its own and there is none for every tenant.
	code, _, answer = hookPost(t, base, "/hooks/globex/st", evt3, "Stripe-Signature", ingestStripeSig(ingestStSec, now, evt3))
	expect("globex", code, 404, answer)
	// verify: none.
	code, _, answer = hookPost(t, base, "/hooks/acme/open", `{"form":1}`, "X-Id", "f1")
	expect("open", code, 202, answer)

	waitDrained(t, js)
	out := readOutputs(t, js, 7)
	type event struct{ subject, status, reason, verified, body string }
	byKey := map[string]event{}
	var unverified []event
	for _, m := range out {
		e := event{m.Subject, m.Header.Get("Dedupe-Status"), m.Header.Get("Dedupe-Reason"), strings.Join(m.Header.Values("Ingest-Verified"), ","), string(m.Data)}
		if e.status == "unkeyed" {
			unverified = append(unverified, e)
			continue
		}
		byKey[m.Header.Get("Idempotency-Key")] = e
	}
	if len(out) != 7 || len(byKey) != 5 || len(unverified) != 2 {
		t.Fatalf("DEDUPED holds %d events: %d keyed %v, %d unkeyed %v", len(out), len(byKey), byKey, len(unverified), unverified)
	}
	for key, want := range map[string]event{
		"acme:gh:d1":    {"deduped.acme.gh", "unique", "", "true", d1},
		"acme:gh:d2":    {"deduped.acme.gh", "unique", "", "true", d2},
		"acme:st:evt_2": {"deduped.acme.st", "unique", "", "true", evt2},
		"acme:st:evt_3": {"deduped.acme.st", "unique", "", "true", evt3},
		"acme:open:f1":  {"deduped.acme.open", "unique", "", "true", `{"form":1}`},
	} {
		if byKey[key] != want {
			t.Errorf("%s: %+v, want %+v", key, byKey[key], want)
		}
	}
	for _, e := range unverified {
		if e.reason != "unverified" || e.verified != "false" || e.subject != "deduped.acme.st" {
			t.Errorf("forwarded forgery: %+v", e)
		}
	}

	metrics := waitHTTP(t, base+"/metrics", http.StatusOK)
	for _, want := range []string{
		`dedupeworker_ingest_requests_total{outcome="accepted",source="gh"} 4`,
		`dedupeworker_ingest_requests_total{outcome="rejected",source="gh"} 2`,
		`dedupeworker_ingest_requests_total{outcome="accepted",source="st"} 4`,
		`dedupeworker_ingest_requests_total{outcome="forwarded_unverified",source="st"} 2`,
		`dedupeworker_ingest_requests_total{outcome="not_found",source="st"} 1`,
		`dedupeworker_ingest_verify_failures_total{reason="mismatch",source="gh"} 1`,
		`dedupeworker_ingest_verify_failures_total{reason="missing",source="gh"} 1`,
		`dedupeworker_ingest_verify_failures_total{reason="missing",source="st"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want+"\n") && !strings.Contains(metrics, want+" ") {
			t.Errorf("ingest metrics lack %q", want)
		}
	}
	if !strings.Contains(metrics, "\ndedupeworker_build_info{goversion=") {
		t.Error("ingest metrics lack dedupeworker_build_info")
	}

	if err := stopIngest(); err != nil {
		t.Fatalf("ingest returned %v", err)
	}
	logs := ingestLogs.String()
	for _, want := range []string{"starting dedupeworker ingest", `"source":"st"`, `"on_invalid":"forward"`, "receiving webhooks",
		"delivery rejected: signature does not verify", "signing secrets loaded", "2 secrets from DEDUPE_INGEST_SECRET_GH", "stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("ingest logs lack %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{ingestGhOld, ingestGhNew, ingestStSec} {
		if strings.Contains(logs, secret) || strings.Contains(workerLogs.String(), secret) {
			t.Errorf("a secret is in the logs")
		}
	}
}

// NATS stops mid-run: deliveries are answered 503 with Retry-After and /readyz fails; once it is back, the
// provider's retries are stored and every accepted event reaches DEDUPED exactly once.
func TestIngestNATSRestart(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_INGEST_PUBLISH_TIMEOUT", "1s")
	base, js, ingestLogs, _, stopIngest := ingestSetup(t, srv)
	post := func(id string) (int, http.Header, string) {
		body := fmt.Sprintf(`{"delivery":%q}`, id)
		return hookPost(t, base, "/hooks/acme/gh", body, "X-GitHub-Delivery", id, "X-Hub-Signature-256", ingestGitHubSig(ingestGhNew, body))
	}
	if code, _, answer := post("before"); code != 202 {
		t.Fatalf("before: %d %s", code, answer)
	}

	srv.Shutdown()
	code, hdr, answer := post("during")
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(answer, "retry later") {
		t.Fatalf("with NATS down: %d %v %q", code, hdr, answer)
	}
	waitHTTP(t, base+"/readyz", http.StatusServiceUnavailable)

	srv.Restart()
	natstest.Eventually(t, 30*time.Second, func() error { // the provider retries "during" until it is taken
		if code, _, answer := post("during"); code != 202 {
			return fmt.Errorf("%d %s", code, answer)
		}
		return nil
	})
	if code, _, answer := post("after"); code != 202 {
		t.Fatalf("after: %d %s", code, answer)
	}
	waitHTTP(t, base+"/readyz", http.StatusOK)

	waitDrained(t, js)
	out := readOutputs(t, js, 3)
	got := map[string]int{}
	for _, m := range out {
		got[m.Header.Get("Idempotency-Key")]++
	}
	if len(out) != 3 || got["acme:gh:before"] != 1 || got["acme:gh:during"] != 1 || got["acme:gh:after"] != 1 {
		t.Fatalf("DEDUPED: %v", got)
	}
	if err := stopIngest(); err != nil {
		t.Fatalf("ingest returned %v", err)
	}
	// gh is guarded (github): its claim in the window, before the publish, may be what meets the outage first.
	if logs := ingestLogs.String(); !strings.Contains(logs, "JetStream did not acknowledge it") && !strings.Contains(logs, "the replay guard's window did not take the claim") {
		t.Errorf("the outage is not in the logs:\n%s", ingestLogs.String())
	}
}

// No NATS configured anywhere and no sources document: the worker runs its embedded server, ingest connects to
// it, and each preset with a secret is served (the others are 404).
func TestIngestEmbeddedPresets(t *testing.T) {
	port := natstest.FreePort(t)
	ingestPort := natstest.FreePort(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no nats CLI context
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CONTEXT", "")
	t.Setenv("DEDUPE_NATS_URL", "")
	t.Setenv("DEDUPE_SOURCES", "")
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", filepath.Join(t.TempDir(), "nats"))
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("DEDUPE_INGEST_ADDR", fmt.Sprintf("127.0.0.1:%d", ingestPort))
	t.Setenv("DEDUPE_INGEST_SECRET_GITHUB", ingestGhNew)
	ingestLogs, stopIngest := runInBackground(t, "ingest") // before the worker: it waits for the embedded server
	_, _ = startWorker(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", ingestPort)
	waitHTTP(t, base+"/readyz", http.StatusOK)

	body := `{"zen":"hi"}`
	if code, _, answer := hookPost(t, base, "/hooks/acme/github", body, "X-GitHub-Delivery", "72d3162e", "X-Hub-Signature-256", ingestGitHubSig(ingestGhNew, body)); code != 202 {
		t.Fatalf("github: %d %s", code, answer)
	}
	if code, _, answer := hookPost(t, base, "/hooks/acme/stripe", `{"id":"evt_1"}`); code != 404 {
		t.Fatalf("stripe without a secret: %d %s", code, answer)
	}
	nc := natstest.Connect(t, fmt.Sprintf("nats://127.0.0.1:%d", port))
	js, _ := jetstream.New(nc)
	out := readOutputs(t, js, 1)
	if out[0].Header.Get("Idempotency-Key") != "acme:github:72d3162e" {
		t.Fatalf("output %v", out[0].Header)
	}
	if err := stopIngest(); err != nil {
		t.Fatal(err)
	}
	logs := ingestLogs.String()
	for _, want := range []string{"DEDUPE_EMBEDDED_LISTEN", "each preset is a source, served once it has a secret",
		"presets without a secret are not served (404) until they have one: DEDUPE_INGEST_SECRET_<SOURCE>", `"stripe"`, `"salesforce"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	// Presets waiting for their secrets are what a first start looks like: one INFO line, not a WARN per preset.
	if strings.Contains(logs, "source not served") || strings.Count(logs, "presets without a secret") != 1 {
		t.Errorf("presets without secrets not said once at INFO:\n%s", logs)
	}
}

// Configuration errors stop ingest before it connects, with exit status 2 and a message naming the place; none
// shows a secret.
func TestIngestConfigErrors(t *testing.T) {
	// Should ingest try to connect, it fails fast with status 1 (and the test says so).
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_INGEST_SECRETS_DIR", "")
	// The worker's errors name the file and line; so do ingest's about a source, whichever check finds them.
	file := filepath.Join(t.TempDir(), "sources.yaml")
	doc := "sources:\n  github:\n    dedupe: github\n    verify: github\n  orders:\n    dedupe: {json: id}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no verify block", map[string]string{"DEDUPE_SOURCES": "sources: {orders: {dedupe: {json: id}}}"}, nil,
			"DEDUPE_SOURCES: line 1: sources.orders: no verify block: declare how its deliveries are verified"},
		{"no secret", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: github}}"}, nil,
			"DEDUPE_SOURCES: line 1: sources.gh.verify: scheme github needs a secret: set DEDUPE_INGEST_SECRET_GH"},
		{"no verify block and no secret, in a file", map[string]string{"DEDUPE_SOURCES_FILE": file}, nil,
			"DEDUPE_SOURCES_FILE " + file + ": line 4: sources.github.verify: scheme github needs a secret: set DEDUPE_INGEST_SECRET_GITHUB, " +
				"or put a file github (every tenant) or <tenant>.github in the secrets directory; " +
				"DEDUPE_SOURCES_FILE " + file + ": line 5: sources.orders: no verify block"},
		{"secret of an undeclared source", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_SECRET_GITHUB": ingestGhOld}, nil,
			"DEDUPE_INGEST_SECRET_GITHUB: names no declared source"},
		{"secret for verify none", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_SECRET_GH": ingestGhOld}, nil,
			"DEDUPE_SOURCES: line 1: sources.gh.verify: scheme none takes no secrets, but DEDUPE_INGEST_SECRET_GH gives some"},
		{"duplicate secret", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: github}}", "DEDUPE_INGEST_SECRET_GH": ingestGhOld + "," + ingestGhOld}, nil,
			"DEDUPE_INGEST_SECRET_GH: secret 2: same as secret 1"},
		{"missing secrets directory", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_SECRETS_DIR": "/nonexistent/dedupe"}, nil,
			"secrets directory /nonexistent/dedupe: no such file or directory"},
		{"secret in the sources file", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: {scheme: github, secret: " + ingestGhOld + "}}}"}, nil,
			"secrets are never read from the sources file"},
		{"bad max body", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_MAX_BODY": "0"}, nil,
			"DEDUPE_INGEST_MAX_BODY: must be between 1 and"},
		{"bad address", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_ADDR": "8080"}, nil,
			`DEDUPE_INGEST_ADDR: must be host:port or :port, got "8080"`},
		{"bad publish timeout", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_PUBLISH_TIMEOUT": "10ms"}, nil,
			"DEDUPE_INGEST_PUBLISH_TIMEOUT: must be between 100ms and 1m"},
		// Before the cap, 1 MiB was accepted and deliveries with over 64 KiB of headers were answered 503 for ever.
		{"header bytes JetStream cannot store", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_MAX_HEADER_BYTES": "65536"}, nil,
			"DEDUPE_INGEST_MAX_HEADER_BYTES: must be between 1024 and 64512 bytes"},
		{"bad body timeout", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_BODY_TIMEOUT": "soon"}, nil,
			`DEDUPE_INGEST_BODY_TIMEOUT: cannot parse "soon" as duration`},
		{"body timeout out of range", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_BODY_TIMEOUT": "11m"}, nil,
			"DEDUPE_INGEST_BODY_TIMEOUT: must be between 100ms and 10m, got 11m"},
		{"buffered bytes below the body limit", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}", "DEDUPE_INGEST_MAX_BUFFERED_BYTES": "1024"}, nil,
			"DEDUPE_INGEST_MAX_BUFFERED_BYTES: must be between DEDUPE_INGEST_MAX_BODY (4194304) and"},
		{"an argument", map[string]string{"DEDUPE_SOURCES": "sources: {gh: {verify: none}}"}, []string{"extra"},
			`ingest: unexpected argument "extra"`},
		{"a bad flag", nil, []string{"--nope"}, "ingest: flag provided but not defined: -nope (see 'dedupeworker ingest -h')"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCLI(t, "", append([]string{"ingest"}, c.args...)...)
			if code != 2 || !strings.Contains(stderr, c.want) || stdout != "" {
				t.Fatalf("exit %d\nstderr %q\nwant   %q", code, stderr, c.want)
			}
			if strings.Contains(stderr, ingestGhOld) {
				t.Fatalf("the error shows the secret: %q", stderr)
			}
		})
	}
}

// Help is on standard output, and the command list names ingest.
func TestIngestHelp(t *testing.T) {
	for _, args := range [][]string{{"ingest", "-h"}, {"help", "ingest"}, {"ingest", "--help"}} {
		code, out, errOut := runCLI(t, "", args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "Usage: dedupeworker ingest") ||
			!strings.Contains(out, "DEDUPE_INGEST_SECRETS_DIR") || !strings.Contains(out, "--creds FILE") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", args, code, out, errOut)
		}
	}
	if _, out, _ := runCLI(t, "", "help"); !strings.Contains(out, "dedupeworker ingest [flags]") {
		t.Errorf("help does not list ingest:\n%s", out)
	}
}

// A server whose max_payload is below what ingest lets through is warned about; a busy address fails the start
// with status 1 and names the setting.
func TestIngestMaxPayloadAndBusyAddress(t *testing.T) {
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.MaxPayload = 1 << 20 }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("DEDUPE_SOURCES", "sources: {open: {verify: none}}")
	t.Setenv("DEDUPE_INGEST_ADDR", ln.Addr().String())
	// The address is taken before NATS is connected: a busy one fails the start before anything else.
	code, _, stderr := runCLI(t, "", "ingest")
	if code != 1 || !strings.Contains(stderr, "ingest: DEDUPE_INGEST_ADDR "+ln.Addr().String()) || strings.Contains(stderr, "connected to NATS") {
		t.Fatalf("busy address: exit %d\n%s", code, stderr)
	}

	t.Setenv("DEDUPE_INGEST_ADDR", fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t)))
	logs, stop := runInBackground(t, "ingest")
	wants := []string{"max_payload is below DEDUPE_INGEST_MAX_BODY", `"max_payload":1048576`,
		"the worker's too-large reason is unreachable", "input stream not found yet"}
	natstest.Eventually(t, 10*time.Second, func() error {
		for _, want := range wants {
			if !strings.Contains(logs.String(), want) {
				return fmt.Errorf("logs lack %q:\n%s", want, logs.String())
			}
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
