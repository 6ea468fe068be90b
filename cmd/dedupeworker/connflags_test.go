package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// natsCLIVars are the variables of the nats CLI that the commands read when no DEDUPE_NATS_* setting is set.
var natsCLIVars = []string{"NATS_URL", "NATS_CONTEXT", "NATS_USER", "NATS_PASSWORD", "NATS_CREDS", "NATS_NKEY",
	"NATS_CERT", "NATS_KEY", "NATS_CA"}

// Every test of this package runs without the nats CLI setup of the machine it runs on: no NATS_* variable and no
// selected context (XDG_CONFIG_HOME points at a directory that does not exist), so that a person's `nats context
// select` never changes what a test connects to. Tests that want a context make their own (cliHome).
func init() {
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(os.TempDir(), fmt.Sprintf("dedupeworker-test-no-nats-config-%d", os.Getpid())))
	for _, k := range natsCLIVars {
		os.Unsetenv(k)
	}
}

// cliHome gives the test its own nats CLI configuration: contexts (name → JSON) and, unless selected is empty,
// the selected context. It returns the nats configuration directory.
func cliHome(t *testing.T, selected string, contexts map[string]string) string {
	t.Helper()
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	dir := filepath.Join(xdg, "nats")
	if err := os.MkdirAll(filepath.Join(dir, "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, doc := range contexts {
		if err := os.WriteFile(filepath.Join(dir, "context", name+".json"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if selected != "" {
		if err := os.WriteFile(filepath.Join(dir, "context.txt"), []byte(selected), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cleanNATSEnv unsets every DEDUPE_NATS_* and NATS_* variable for the test.
func cleanNATSEnv(t *testing.T) {
	t.Helper()
	for _, k := range append([]string{"DEDUPE_NATS_URL", "DEDUPE_NATS_CREDS", "DEDUPE_NATS_NKEY_SEED_FILE", "DEDUPE_NATS_TLS_CA",
		"DEDUPE_NATS_TLS_CERT", "DEDUPE_NATS_TLS_KEY", "DEDUPE_NATS_CONNECT_TIMEOUT"}, natsCLIVars...) {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// resolveArgs resolves the connection of a command given args (connection flags only) in the current environment.
func resolveArgs(t *testing.T, args ...string) (natsconn.Config, bool, error) {
	t.Helper()
	fs := newFlagSet("window get", "")
	f := addConnFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	return f.resolve(cfg)
}

// connectArgs is resolveArgs, then connect (as window and dlq do).
func connectArgs(t *testing.T, args ...string) (*nats.Conn, error) {
	t.Helper()
	fs := newFlagSet("window get", "")
	f := addConnFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := f.connect(context.Background(), cfg, "dedupeworker test", slog.New(slog.DiscardHandler))
	if nc != nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

func touch(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flags beat DEDUPE_NATS_* settings, which beat NATS_* variables, which beat the context; DEDUPE_NATS_* and the
// nats CLI's configuration are never mixed; no server anywhere means the embedded one.
func TestConnPrecedence(t *testing.T) {
	files := t.TempDir()
	flagCreds, dedupeCreds, envCreds, ctxCreds := touch(t, files, "flag.creds"), touch(t, files, "dedupe.creds"),
		touch(t, files, "env.creds"), touch(t, files, "ctx.creds")
	flagNkey, ctxCA, envCA, flagCA := touch(t, files, "flag.nk"), touch(t, files, "ctx-ca.pem"), touch(t, files, "env-ca.pem"), touch(t, files, "flag-ca.pem")
	ctxDoc := fmt.Sprintf(`{"url":"nats://ctx:4222","creds":%q,"ca":%q,"inbox_prefix":"_I.ctx","tls_first":true}`, ctxCreds, ctxCA)
	type want struct {
		url, creds, nkey, user, password, token, ca string
		embedded                                    bool
		fromCtx                                     bool // the inbox prefix and tls_first of context "ctx"
		origin                                      string
	}
	cases := []struct {
		name     string
		selected string            // context.txt
		env      map[string]string // DEDUPE_NATS_* and NATS_*
		args     []string
		want     want
	}{
		{"flags beat everything", "ctx",
			map[string]string{"DEDUPE_NATS_URL": "nats://dedupe:4222", "DEDUPE_NATS_CREDS": dedupeCreds, "NATS_URL": "nats://env:4222",
				"NATS_CREDS": envCreds, "NATS_CONTEXT": "ctx"},
			[]string{"-s", "nats://flag:4222", "--creds", flagCreds, "--tlsca", flagCA},
			want{url: "nats://flag:4222", creds: flagCreds, ca: flagCA, origin: "url from -s, credentials from --creds"}},
		{"DEDUPE_NATS_* beat NATS_* and contexts", "ctx",
			map[string]string{"DEDUPE_NATS_URL": "nats://dedupe:4222", "DEDUPE_NATS_CREDS": dedupeCreds, "NATS_URL": "nats://env:4222",
				"NATS_CREDS": envCreds, "NATS_CONTEXT": "ctx"}, nil,
			want{url: "nats://dedupe:4222", creds: dedupeCreds, origin: "url from DEDUPE_NATS_URL, credentials from DEDUPE_NATS_CREDS"}},
		{"NATS_* beat the context", "ctx",
			map[string]string{"NATS_URL": "nats://env:4222", "NATS_CREDS": envCreds, "NATS_CA": envCA}, nil,
			want{url: "nats://env:4222", creds: envCreds, ca: envCA, fromCtx: true, origin: "url from NATS_URL, credentials from NATS_CREDS"}},
		{"the context named by NATS_CONTEXT", "",
			map[string]string{"NATS_CONTEXT": "ctx"}, nil,
			want{url: "nats://ctx:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true, origin: `url from context "ctx" (`}},
		{"the selected context", "ctx", nil, nil,
			want{url: "nats://ctx:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true, origin: `url from context "ctx" (`}},
		{"NATS_CONTEXT beats the selection", "other", map[string]string{"NATS_CONTEXT": "ctx"}, nil,
			want{url: "nats://ctx:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true}},
		{"nothing: the embedded server", "", nil, nil, want{embedded: true}},
		{"a flag over one part of the context", "ctx", nil, []string{"-s", "nats://flag:4222"},
			want{url: "nats://flag:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true, origin: `url from -s, credentials from context "ctx"`}},
		{"a credential flag replaces the context's credentials", "ctx", nil, []string{"--nkey", flagNkey},
			want{url: "nats://ctx:4222", nkey: flagNkey, ca: ctxCA, fromCtx: true, origin: "credentials from --nkey"}},
		{"DEDUPE_NATS_* without a URL: still no NATS_* (embedded)", "ctx",
			map[string]string{"DEDUPE_NATS_CREDS": dedupeCreds, "NATS_URL": "nats://env:4222"}, nil,
			want{creds: dedupeCreds, embedded: true}},
		{"--context beats DEDUPE_NATS_*", "",
			map[string]string{"DEDUPE_NATS_URL": "nats://dedupe:4222", "DEDUPE_NATS_CREDS": dedupeCreds}, []string{"--context", "ctx"},
			want{url: "nats://ctx:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true}},
		{"--context beats NATS_CONTEXT, NATS_URL over its url", "other",
			map[string]string{"NATS_CONTEXT": "other", "NATS_URL": "nats://env:4222"}, []string{"--context", "ctx"},
			want{url: "nats://env:4222", creds: ctxCreds, ca: ctxCA, fromCtx: true, origin: `url from NATS_URL, credentials from context "ctx"`}},
		{"NATS_USER and NATS_PASSWORD replace the context's credentials", "ctx",
			map[string]string{"NATS_USER": "u", "NATS_PASSWORD": "p"}, nil,
			want{url: "nats://ctx:4222", user: "u", password: "p", ca: ctxCA, fromCtx: true, origin: "credentials from NATS_USER and NATS_PASSWORD"}},
		{"NATS_USER alone is a token, as in the nats CLI", "", map[string]string{"NATS_USER": "tok", "NATS_URL": "nats://env:4222"}, nil,
			want{url: "nats://env:4222", token: "tok", origin: "credentials from NATS_USER (a token)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cleanNATSEnv(t)
			cliHome(t, tc.selected, map[string]string{"ctx": ctxDoc, "other": `{"url":"nats://other:4222"}`})
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, embedded, err := resolveArgs(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			w := tc.want
			got := want{url: c.URL, creds: c.Creds, nkey: c.NkeySeedFile, user: c.User, password: c.Password, token: c.Token,
				ca: c.TLSCA, embedded: embedded, fromCtx: c.InboxPrefix == "_I.ctx" && c.TLSFirst, origin: w.origin}
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			if !strings.Contains(c.Origin, w.origin) {
				t.Errorf("origin %q, want it to contain %q", c.Origin, w.origin)
			}
		})
	}
}

func TestConnFlagErrors(t *testing.T) {
	files := t.TempDir()
	creds, nk := touch(t, files, "a.creds"), touch(t, files, "a.nk")
	missing := filepath.Join(files, "missing.creds")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"creds and nkey", nil, []string{"--creds", creds, "--nkey", nk}, "window get: --creds and --nkey exclude each other"},
		{"cert without key", nil, []string{"--tlscert", creds}, "window get: --tlscert and --tlskey go together"},
		{"unreadable --creds", nil, []string{"--creds", missing}, "window get: --creds: open " + missing},
		{"unreadable NATS_CREDS", map[string]string{"NATS_CREDS": missing}, nil, "window get: NATS_CREDS: open " + missing},
		{"NATS_PASSWORD alone", map[string]string{"NATS_PASSWORD": "p"}, nil, "NATS_PASSWORD is set without NATS_USER"},
		{"two NATS_ credentials", map[string]string{"NATS_USER": "u", "NATS_NKEY": nk}, nil, "NATS_USER and NATS_NKEY are set"},
		{"a certificate from one place, no key", map[string]string{"NATS_CERT": creds}, nil,
			"a client certificate needs its key: certificate \"" + creds + "\" (NATS_CERT), key \"\" (none)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cleanNATSEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := resolveArgs(t, tc.args...)
			var ee *exitError
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("got %v, want a usage error %q", err, tc.want)
			}
		})
	}
}

// A context the commands cannot find is a usage error that names the file looked for, however it was chosen.
func TestConnUnknownContext(t *testing.T) {
	cleanNATSEnv(t)
	dir := cliHome(t, "gone", map[string]string{"dev": `{"url":"nats://127.0.0.1:1"}`})
	nope := filepath.Join(dir, "context", "nope.json")
	gone := filepath.Join(dir, "context", "gone.json")
	code, _, stderr := runCLI(t, "", "window", "get", "--context", "nope", "--idempotency-key", "a:s:k")
	if code != 2 || !strings.Contains(stderr, `window get: --context: context "nope": no such context: `+nope+" does not exist") {
		t.Errorf("--context nope: exit %d, %q", code, stderr)
	}
	t.Setenv("NATS_CONTEXT", "nope")
	code, _, stderr = runCLI(t, "", "window", "get", "--idempotency-key", "a:s:k")
	if code != 2 || !strings.Contains(stderr, "window get: NATS_CONTEXT: ") || !strings.Contains(stderr, nope) {
		t.Errorf("NATS_CONTEXT=nope: exit %d, %q", code, stderr)
	}
	t.Setenv("NATS_CONTEXT", "")
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	code, _, stderr = runCLI(t, "", "run")
	if code != 2 || !strings.Contains(stderr, "run: the context selected in "+filepath.Join(dir, "context.txt")) ||
		!strings.Contains(stderr, gone) || !strings.Contains(stderr, "set DEDUPE_NATS_URL") {
		t.Errorf("run with a stale selection: exit %d, %q", code, stderr)
	}
	// A DEDUPE_NATS_* setting means the nats CLI's configuration is not read at all.
	t.Setenv("DEDUPE_NATS_URL", "nats://127.0.0.1:1")
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1ms")
	code, _, stderr = runCLI(t, "", "window", "get", "--idempotency-key", "a:s:k")
	if code != 1 || strings.Contains(stderr, "gone") {
		t.Errorf("with DEDUPE_NATS_URL: exit %d, %q", code, stderr)
	}
}

// A context saved by `nats context add` connects the commands, whether selected with `nats context select`, named by
// NATS_CONTEXT or by --context; wrong credentials fail at once, without the secret.
func TestConnContexts(t *testing.T) {
	cleanNATSEnv(t)
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Username, o.Password = "dedupe", "s3cret-pass" }))
	hostPort := fmt.Sprintf("127.0.0.1:%d", srv.Opts.Port)
	dir := cliHome(t, "dev", map[string]string{
		"dev":   fmt.Sprintf(`{"description":"test","url":%q,"user":"dedupe","password":"s3cret-pass"}`, srv.URL()),
		"wrong": fmt.Sprintf(`{"url":%q,"user":"dedupe","password":"wrong-pass"}`, srv.URL()),
	})
	connected := func(how string, args ...string) {
		t.Helper()
		nc, err := connectArgs(t, args...)
		if err != nil || !nc.IsConnected() {
			t.Fatalf("%s: %v", how, err)
		}
	}
	connected("selected with nats context select")
	t.Setenv("NATS_CONTEXT", "dev")
	os.WriteFile(filepath.Join(dir, "context.txt"), []byte("wrong"), 0o600)
	connected("NATS_CONTEXT over the selection")
	t.Setenv("NATS_CONTEXT", "wrong")
	connected("--context over NATS_CONTEXT", "--context", "dev")
	connected("--context as a path", "--context", filepath.Join(dir, "context", "dev.json"))

	failsFast := func(how, secret string, args ...string) string {
		t.Helper()
		start := time.Now()
		_, err := connectArgs(t, args...)
		var ee *exitError
		if err == nil || !errors.As(err, &ee) || ee.code != exitFailure || !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("%s: got %v", how, err)
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("%s: took %s to fail", how, elapsed)
		}
		if strings.Contains(err.Error(), secret) || !strings.HasPrefix(err.Error(), "natsconn: connect to nats://") {
			t.Errorf("%s: %q", how, err)
		}
		return err.Error()
	}
	msg := failsFast("a context with the wrong password", "wrong-pass") // NATS_CONTEXT=wrong
	if !strings.Contains(msg, `credentials from context "wrong" (`+filepath.Join(dir, "context", "wrong.json")+`)`) {
		t.Errorf("the error does not say where the credentials came from: %q", msg)
	}
	t.Setenv("NATS_CONTEXT", "")
	t.Setenv("NATS_URL", "nats://dedupe:wrong-pass@"+hostPort)
	msg = failsFast("NATS_URL with the wrong password", "wrong-pass")
	if !strings.Contains(msg, "nats://[redacted]@"+hostPort) {
		t.Errorf("not redacted: %q", msg)
	}

	// End to end: window get through --context, on a bucket made by a worker's settings.
	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("dedupe", "s3cret-pass"))
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kvwindow.New(ctx, js, kvwindow.Config{Bucket: "ctx-window", Provision: true}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NATS_URL", "")
	t.Setenv("DEDUPE_BUCKET", "ctx-window")
	code, stdout, stderr := runCLI(t, "", "window", "get", "--context", "dev", "--idempotency-key", "acme:gh:k1")
	if code != 0 || strings.TrimSpace(stdout) != `{"claimed":false,"tenant":"acme","source":"gh","key":"k1","bucket":"ctx-window"}` {
		t.Fatalf("window get --context dev: exit %d, %q, %q", code, stdout, stderr)
	}
	// DEDUPE_NATS_URL beats NATS_URL (here pointing nowhere).
	t.Setenv("NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_NATS_URL", "nats://dedupe:s3cret-pass@"+hostPort)
	code, stdout, stderr = runCLI(t, "", "window", "get", "--idempotency-key", "acme:gh:k1")
	if code != 0 || strings.TrimSpace(stdout) != `{"claimed":false,"tenant":"acme","source":"gh","key":"k1","bucket":"ctx-window"}` {
		t.Fatalf("window get with DEDUPE_NATS_URL and NATS_URL: exit %d, %q, %q", code, stdout, stderr)
	}
}

// The worker started before its NATS server (compose, Kubernetes) waits for it, logging each attempt, and runs once
// the server is there.
func TestConnRunWaitsForNATS(t *testing.T) {
	cleanNATSEnv(t)
	port := natstest.FreePort(t)
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", port))
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	logs, stop := startWorker(t)
	natstest.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(logs.String(), "NATS not reachable yet; retrying"); n < 2 {
			return fmt.Errorf("%d retries logged", n)
		}
		return nil
	})
	natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Port = port }))
	waitConsuming(t, logs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"connected to NATS"`) || !strings.Contains(l, `"from":"url from DEDUPE_NATS_URL"`) {
		t.Errorf("no connected line naming where the url came from:\n%s", l)
	}
}

// The wait is bounded by DEDUPE_NATS_CONNECT_TIMEOUT; a wrong password is not waited for, whatever the bound.
func TestConnRetryBoundAndFailFast(t *testing.T) {
	cleanNATSEnv(t)
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	start := time.Now()
	code, _, stderr := runCLI(t, "", "window", "get", "--idempotency-key", "a:s:k")
	elapsed := time.Since(start)
	if code != 1 || !strings.Contains(stderr, "window get: connect to nats://127.0.0.1:") || !strings.Contains(stderr, "gave up after") ||
		!strings.Contains(stderr, "NATS not reachable yet; retrying") {
		t.Errorf("exit %d, %q", code, stderr)
	}
	if elapsed < time.Second || elapsed > 10*time.Second { // the 1s bound, not run's 2m default; a loaded machine stretches it
		t.Errorf("gave up after %s with a 1s bound", elapsed)
	}

	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Username, o.Password = "dedupe", "s3cret-pass" }))
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://dedupe:hunter2@127.0.0.1:%d", srv.Opts.Port))
	os.Unsetenv("DEDUPE_NATS_CONNECT_TIMEOUT") // run's default: 2m
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	start = time.Now()
	code, _, stderr = runCLI(t, "", "run")
	if code != 1 || !strings.Contains(stderr, "run: connect to nats://[redacted]@127.0.0.1:") ||
		!strings.Contains(strings.ToLower(stderr), "authorization violation") || strings.Contains(stderr, "hunter2") {
		t.Errorf("run with a wrong password: exit %d, %q", code, stderr)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("run with a wrong password took %s to fail", elapsed)
	}
}

func TestConnFlagsInUsage(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"window", "get", "-h"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		for _, want := range []string{"-server", "-creds", "-nkey", "-tlsca", "-tlscert", "-tlskey", "-context"} {
			if code != 0 || !strings.Contains(stdout+stderr, want) {
				t.Errorf("%v: exit %d, lacks %s: %q", args, code, want, stdout+stderr)
			}
		}
	}
}

// A malformed server URL stops every command at once with status 2, naming where it came from and what is wrong;
// before, it was dialled (a name that cannot resolve, retried until the connect timeout) or failed with status 1
// and url.Parse's message, password included. A well-formed URL whose host does not resolve is still retried.
func TestConnMalformedURL(t *testing.T) {
	const bad = `"nats://exa mple:4222": invalid character " " in host name`
	for _, c := range []struct {
		name    string
		env     map[string]string
		context string // a context "dev" with this URL, selected
		args    []string
		want    string
	}{
		{"DEDUPE_NATS_URL, run", map[string]string{"DEDUPE_NATS_URL": "nats://exa mple:4222"}, "", []string{"run"}, "run: DEDUPE_NATS_URL: " + bad},
		{"DEDUPE_NATS_URL, ingest", map[string]string{"DEDUPE_NATS_URL": "nats://host:port"}, "", []string{"ingest"},
			`ingest: DEDUPE_NATS_URL: "nats://host:port": invalid port ":port" after host`},
		{"a port out of range", map[string]string{"DEDUPE_NATS_URL": "nats://:99999"}, "", []string{"window", "status"},
			`window status: DEDUPE_NATS_URL: "nats://:99999": port 99999 is not between 1 and 65535`},
		{"a scheme, from -s", nil, "", []string{"window", "status", "-s", "htp://x"},
			`window status: -s: "htp://x": scheme "htp" is not one of nats, tls, ws, wss`},
		{"an empty entry, from NATS_URL", map[string]string{"NATS_URL": "nats://a:4222,,"}, "", []string{"run"},
			"run: NATS_URL: URL 2 of 3 is empty (a stray comma?)"},
		{"from a context", nil, "nats://app:hunter2@exa mple:4222", []string{"dlq", "ls"},
			`dlq ls: context "dev" (CTX): "nats://[redacted]@exa mple:4222": invalid character " " in host name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cleanNATSEnv(t)
			t.Setenv("DEDUPE_HTTP_ADDR", "")
			t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1m") // a retry would show as a timeout of the test
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			want := c.want
			if c.context != "" {
				dir := cliHome(t, "dev", map[string]string{"dev": fmt.Sprintf(`{"url":%q}`, c.context)})
				want = strings.Replace(want, "CTX", filepath.Join(dir, "context", "dev.json"), 1)
			}
			start := time.Now()
			code, out, stderr := runCLI(t, "", c.args...)
			if code != 2 || out != "" || strings.TrimSpace(stderr) != want {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant   %q", code, out, stderr, want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}

	cleanNATSEnv(t)
	t.Setenv("DEDUPE_NATS_URL", "nats://nosuchhost.invalid:4222")
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	code, _, stderr := runCLI(t, "", "window", "get", "--idempotency-key", "a:s:k")
	if code != 1 || !strings.Contains(stderr, "NATS not reachable yet; retrying") || !strings.Contains(stderr, "gave up after") {
		t.Errorf("a host that does not resolve: exit %d, %q", code, stderr)
	}
}
