package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

func httpGet(url string) (int, http.Header, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// roleEnv points a role's HTTP at a free port and returns its base URL. ingest serves everything on its own
// address; the worker's metrics address is switched off for ingest, so that two roles never share a port.
func roleEnv(t *testing.T, role string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "sources: {open: {dedupe: {header: X-Id}, verify: none}}")
	switch role {
	case "run":
		t.Setenv("DEDUPE_HTTP_ADDR", addr)
	case "ingest":
		t.Setenv("DEDUPE_HTTP_ADDR", "")
		t.Setenv("DEDUPE_INGEST_ADDR", addr)
	}
	return "http://" + addr
}

// Both roles listen before they connect: while NATS cannot be reached, /healthz is 200, /readyz 503 saying what
// the start waits for (no password), /metrics answers with the build and dedupeworker_ready 0, ingest answers
// deliveries 503 with Retry-After; a stop then ends the role at once, exit status 0, and frees the port.
func TestHealthBeforeNATS(t *testing.T) {
	for _, role := range []string{"run", "ingest"} {
		t.Run(role, func(t *testing.T) {
			port := natstest.FreePort(t) // nothing listens there
			t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://user:hunter2@127.0.0.1:%d", port))
			t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "10m")
			base := roleEnv(t, role)
			logs := &natstest.Buffer{}
			r := startRun(t, logs, role)

			waitHTTP(t, base+"/healthz", http.StatusOK)
			// The role records its first step a moment after it serves HTTP ("not ready: starting" until then).
			want := fmt.Sprintf("not ready: connecting to NATS at nats://[redacted]@127.0.0.1:%d", port)
			natstest.Eventually(t, 20*time.Second, func() error {
				code, _, ready, err := httpGet(base + "/readyz")
				if err == nil && (code != http.StatusServiceUnavailable || !strings.HasPrefix(ready, want)) {
					err = fmt.Errorf("/readyz: %d %q, want 503 starting with %q", code, ready, want)
				}
				return err
			})
			if _, _, ready, _ := httpGet(base + "/readyz"); strings.Contains(ready, "hunter2") {
				t.Errorf("/readyz shows the password: %q", ready)
			}
			_, _, metrics, err := httpGet(base + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b := readBuildInfo()
			revision := b.Revision
			if revision == "" {
				revision = "unknown"
			}
			wantMetrics := []string{fmt.Sprintf(`dedupeworker_build_info{goversion=%q,revision=%q,version=%q} 1`, b.GoVersion, revision, b.Version)}
			if role == "run" {
				wantMetrics = append(wantMetrics, "\ndedupeworker_ready 0\n")
			} else {
				wantMetrics = append(wantMetrics, "dedupeworker_ingest_in_flight_limit ")
			}
			for _, want := range wantMetrics {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %q:\n%s", want, metrics)
				}
			}
			if role == "ingest" {
				code, hdr, answer := hookPost(t, base, "/hooks/acme/open", "{}", "X-Id", "1")
				if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(answer, "connecting to NATS") {
					t.Errorf("delivery while starting: %d, Retry-After %q, %q", code, hdr.Get("Retry-After"), answer)
				}
			}

			start := time.Now()
			if err, stuck := r.stopFor(nil, 10*time.Second); stuck != nil {
				t.Fatal(stuck)
			} else if err != nil {
				t.Errorf("stopped while connecting: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("stop took %s", took)
			}
			if _, _, _, err := httpGet(base + "/healthz"); err == nil {
				t.Errorf("%s still serves HTTP after it returned", role)
			}
			for _, want := range []string{"stopping: context canceled", "stopped"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("logs lack %q:\n%s", want, logs.String())
				}
			}
		})
	}
}

// A server without JetStream, or an account without it, stops either role's start with a one-line error saying
// so, exit status 1; while no responders are asked again, /readyz says why.
func TestJetStreamNotEnabled(t *testing.T) {
	noJetStream := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.JetStream = false }))
	accounts := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		withJS, withoutJS := server.NewAccount("WITHJS"), server.NewAccount("NOJS")
		o.Accounts = []*server.Account{withJS, withoutJS}
		o.Users = []*server.User{{Username: "js", Password: "js", Account: withJS}, {Username: "nojs", Password: "nojs", Account: withoutJS}}
	}))
	if acc, err := accounts.LookupAccount("WITHJS"); err != nil {
		t.Fatal(err)
	} else if err := acc.EnableJetStream(map[string]server.JetStreamAccountLimits{"": {MaxMemory: -1, MaxStore: -1, MaxStreams: -1, MaxConsumers: -1}}, nil); err != nil {
		t.Fatal(err)
	}
	noJSAccount := "nats://nojs:nojs@" + strings.TrimPrefix(accounts.URL(), "nats://")

	cases := []struct {
		name, url string
		wantErr   string
		wantReady string // "": the start fails before a probe can see it
	}{
		{"server", noJetStream.URL(),
			noJetStream.URL() + ": JetStream is not enabled on this server (start nats-server with -js",
			"not ready: JetStream not enabled on the server at " + noJetStream.URL() + ": no responders on $JS.API.STREAM.INFO.INGEST"},
		{"account", noJSAccount,
			"nats://[redacted]@" + strings.TrimPrefix(accounts.URL(), "nats://") + ": JetStream is not enabled for this account", ""},
	}
	for _, tc := range cases {
		for _, role := range []string{"run", "ingest"} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				t.Setenv("DEDUPE_NATS_URL", tc.url)
				t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "2s") // no responders are asked again for this long
				t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", t.TempDir())
				base := roleEnv(t, role)
				logs := &natstest.Buffer{}
				r := startRun(t, logs, role)
				if tc.wantReady != "" {
					natstest.Eventually(t, 2*time.Second, func() error {
						code, _, body, err := httpGet(base + "/readyz")
						if err != nil {
							return err
						}
						if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, tc.wantReady) {
							return fmt.Errorf("/readyz %d %q, want 503 %q", code, body, tc.wantReady)
						}
						return nil
					})
				}
				select {
				case <-r.done:
				case <-time.After(15 * time.Second):
					t.Fatalf("%s still starting after 15s; logs:\n%s", role, logs.String())
				}
				var stderr strings.Builder
				code := exitCode(r.err, &stderr)
				msg := stderr.String()
				if code != 1 || !strings.HasPrefix(msg, role+": "+tc.wantErr) || strings.Count(msg, "\n") != 1 || strings.Contains(msg, "nojs:nojs") {
					t.Errorf("exit %d, %q; want 1 and one line starting %q", code, msg, tc.wantErr)
				}
			})
		}
	}
}

// The metrics table of the reference names the build gauge.
func TestReferenceDocumentsBuildInfo(t *testing.T) {
	raw, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "| `dedupeworker_build_info` |") {
		t.Error("docs/reference.md's metrics table does not list dedupeworker_build_info")
	}
}

// A handoff passes the port from one server to the next without refusing a connection: one made after next and
// before the second server serves waits for it, and the port closes with the last server.
func TestHandoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	hand, first := newHandoff(ln)
	serve := func(l net.Listener, name string) (*http.Server, chan error) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(l) }()
		return srv, done
	}
	a, aDone := serve(first, "first")
	if _, _, body, err := httpGet(base + "/"); err != nil || body != "first" {
		t.Fatalf("first server: %q, %v", body, err)
	}
	second := hand.next()
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("first Serve: %v", err)
	}
	got := make(chan string, 1)
	go func() { // in the gap: nobody serves yet
		_, _, body, err := httpGet(base + "/")
		if err != nil {
			body = err.Error()
		}
		got <- body
	}()
	b, bDone := serve(second, "second")
	if body := <-got; body != "second" {
		t.Fatalf("request during the handoff: %q", body)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-bDone
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the port still accepts after the last server closed")
	}
}
