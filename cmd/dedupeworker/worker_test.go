package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

func waitHTTP(t *testing.T, url string, want int) string {
	t.Helper()
	var body string
	natstest.Eventually(t, 20*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != want {
			return fmt.Errorf("%s: status %d: %s", url, resp.StatusCode, body)
		}
		return nil
	})
	return body
}

func readOutputs(t *testing.T, js jetstream.JetStream, n int) []*nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var msgs []*nats.Msg
	natstest.Eventually(t, 20*time.Second, func() error {
		s, err := js.Stream(ctx, "DEDUPED")
		if err != nil {
			return err
		}
		if got := s.CachedInfo().State.Msgs; got < uint64(n) {
			return fmt.Errorf("DEDUPED holds %d messages, want %d", got, n)
		}
		return nil
	})
	s, _ := js.Stream(ctx, "DEDUPED")
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
	}
	return msgs
}

func TestWorkerExternalNATS(t *testing.T) {
	srv := natstest.Run(t)
	base := workerEnv(t, srv, "sources: {gh: {dedupe: github}, legacy: {}}")
	t.Setenv("DEDUPE_PPROF", "true")
	logs, stop := startWorker(t)
	if body := waitHTTP(t, base+"/readyz", http.StatusOK); body != "ready\n" {
		t.Errorf("/readyz: %q", body)
	}
	waitHTTP(t, base+"/healthz", http.StatusOK)
	waitHTTP(t, base+"/debug/pprof/", http.StatusOK)

	nc := natstest.Connect(t, srv.URL())
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, d := range []string{"d1", "d1", "d2"} {
		m := nats.NewMsg("ingest.acme.gh")
		m.Header.Set("X-GitHub-Delivery", d)
		m.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "ingest.acme.legacy", []byte("x")); err != nil {
		t.Fatal(err)
	}
	out := readOutputs(t, js, 3)
	got := map[string]string{}
	for _, m := range out {
		got[m.Header.Get("Idempotency-Key")] = m.Header.Get("Dedupe-Status")
	}
	if got["acme:gh:d1"] != "unique" || got["acme:gh:d2"] != "unique" || len(got) != 3 {
		t.Fatalf("outputs: %v", got)
	}
	// An output is stored before the worker's ack is confirmed, and the worker counts an envelope only then: poll.
	// The copy of d1 that did not publish is waited for too: one still deciding when the claim is forgotten below
	// claims the key afresh and is the replay (seen under load: "window get after forget" found it claimed).
	natstest.Eventually(t, 20*time.Second, func() error {
		metrics := waitHTTP(t, base+"/metrics", http.StatusOK)
		for _, want := range []string{`dedupeworker_envelopes_total{outcome="unique",source="gh"} 2`,
			`dedupeworker_envelopes_total{outcome="duplicate",source="gh"} 1`, "dedupeworker_sources_without_dedupe 1",
			"\ndedupeworker_ready 1\n", "\ndedupeworker_build_info{goversion="} {
			if !strings.Contains(metrics, want) {
				return fmt.Errorf("metrics lack %q", want)
			}
		}
		return nil
	})

	// The window commands see the claim the worker made, and forgetting it replays the event.
	code, stdout, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", "d1")
	// The two copies of d1 (sequences 1 and 2) are in flight together: either may hold the claim.
	if code != 0 || !strings.Contains(stdout, `"claimed":true`) ||
		!strings.Contains(stdout, `"claimant_seq":1`) && !strings.Contains(stdout, `"claimant_seq":2`) ||
		!strings.Contains(stdout, `"expires_in_seconds":259`) {
		t.Fatalf("window get: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "", "window", "forget", "--tenant", "acme", "--source", "gh", "--key", "d1")
	if code != 0 || strings.TrimSpace(stdout) != `{"forgotten":1}` {
		t.Fatalf("window forget: %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", "d1")
	if code != 0 || strings.TrimSpace(stdout) != `{"claimed":false,"tenant":"acme","source":"gh","key":"d1","bucket":"dedupe-window"}` {
		t.Fatalf("window get after forget: %d %s", code, stdout)
	}
	replay := nats.NewMsg("ingest.acme.gh")
	replay.Header.Set("X-GitHub-Delivery", "d1")
	if _, err := js.PublishMsg(ctx, replay); err != nil {
		t.Fatal(err)
	}
	readOutputs(t, js, 4)
	code, _, stderr = runCLI(t, "", "window", "forget", "--tenant", "acme", "--all")
	if code != 2 || !strings.Contains(stderr, "--yes") {
		t.Fatalf("forget --all without --yes: %d %s", code, stderr)
	}
	code, stdout, _ = runCLI(t, "", "window", "forget", "--tenant", "acme", "--all", "--yes")
	if code != 0 || strings.TrimSpace(stdout) != `{"forgotten":2}` {
		t.Fatalf("forget --all: %d %s", code, stdout)
	}

	if err := stop(); err != nil {
		t.Fatalf("run returned %v", err)
	}
	l := logs.String()
	for _, want := range []string{"source declares no dedupe", `"source":"legacy"`, "stopped"} {
		if !strings.Contains(l, want) {
			t.Errorf("logs lack %q:\n%s", want, l)
		}
	}
}

func TestWorkerEmbeddedDefault(t *testing.T) {
	port := natstest.FreePort(t)
	t.Setenv("DEDUPE_NATS_URL", "")
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", filepath.Join(t.TempDir(), "nats"))
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	logs, stop := startWorker(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	waitConsuming(t, logs)
	if !strings.Contains(logs.String(), "embedded NATS server with JetStream started") {
		t.Fatalf("consuming, but the embedded server's start was not logged:\n%s", logs.String())
	}
	nc := natstest.Connect(t, url)
	js, _ := jetstream.New(nc)
	m := nats.NewMsg("ingest.acme.github")
	m.Header.Set("X-GitHub-Delivery", "72d3162e")
	m.Data = []byte("{}")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	out := readOutputs(t, js, 1)
	if out[0].Header.Get("Idempotency-Key") != "acme:github:72d3162e" {
		t.Fatalf("output headers %v", out[0].Header)
	}
	nc.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "declaring one source per preset") {
		t.Errorf("no preset log line:\n%s", logs.String())
	}
}

// A busy embedded port fails the start with exit status 1 and the port named, with or without the HTTP server
// (which starts first: its serving goroutine once read the server the failed start's shutdown had cleared, and
// the process died of a nil pointer instead, when the goroutine ran late: one start in a few, so it is tried 25
// times).
func TestWorkerEmbeddedBusyPort(t *testing.T) {
	for i, withHTTP := range append([]bool{false}, slices.Repeat([]bool{true}, 25)...) {
		t.Run(fmt.Sprintf("%d/http=%v", i, withHTTP), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			t.Setenv("DEDUPE_NATS_URL", "")
			t.Setenv("DEDUPE_EMBEDDED_LISTEN", ln.Addr().String())
			t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", t.TempDir())
			t.Setenv("DEDUPE_HTTP_ADDR", "")
			if withHTTP {
				t.Setenv("DEDUPE_HTTP_ADDR", "127.0.0.1:0") // any free port: the HTTP server listens on what it is given
			}
			code, _, stderr := runCLI(t, "", "run")
			if code != 1 || !strings.Contains(stderr, "cannot listen on "+ln.Addr().String()) {
				t.Fatalf("busy port: exit %d, %q", code, stderr)
			}
		})
	}
}

func TestWorkerNATSUnreachable(t *testing.T) {
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://user:hunter2@127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s") // the first connect retries an unreachable server for this long
	start := time.Now()
	code, _, stderr := runCLI(t, "", "run")
	if code != 1 || !strings.Contains(stderr, "run: connect to") || strings.Contains(stderr, "hunter2") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatalf("took %s to fail", time.Since(start))
	}
}

func TestWindowCommandErrors(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"window"}, 2, "subcommand is required"},
		{[]string{"window", "list"}, 2, "unknown subcommand"},
		{[]string{"window", "get", "--tenant", "a.b", "--source", "s", "--key", "k"}, 2, "--tenant"},
		{[]string{"window", "get", "--tenant", "a"}, 2, "--source and --key are required"},
		{[]string{"window", "forget", "--tenant", "a", "--all", "--key", "k", "--yes"}, 2, "exclude"},
		{[]string{"window", "get", "--tenant", "a", "--source", "s", "--key", "k"}, 1, "window get: bucket \"dedupe-window\" does not exist"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

func TestSourcesCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("sources:\n  github: {dedupe: github}\n  stripe: {dedupe: {preset: stripe, ttl: 48h}}\n  legacy: {}\n"), 0o600)
	os.WriteFile(bad, []byte("sources:\n  orders: {dedupe: {json: data..id}}\n"), 0o600)
	code, stdout, stderr := runCLI(t, "", "sources", "check", good)
	if code != 0 || !strings.Contains(stdout, "48h") || !strings.Contains(stdout, "72h") || !strings.Contains(stdout, "without dedupe") || !strings.Contains(stdout, "legacy") {
		t.Fatalf("good: %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "", "sources", "check", bad)
	if code != 2 || !strings.Contains(stderr, "sources.orders.dedupe.json") {
		t.Fatalf("bad: %d %q", code, stderr)
	}
	t.Setenv("DEDUPE_SOURCES", "sources: {svix: {dedupe: svix}}")
	code, stdout, _ = runCLI(t, "", "sources", "check")
	if code != 0 || !strings.Contains(stdout, "svix") {
		t.Fatalf("from env: %d %s", code, stdout)
	}
	// The worker refuses the same bad file at boot with the same message.
	t.Setenv("DEDUPE_SOURCES", "")
	t.Setenv("DEDUPE_SOURCES_FILE", bad)
	code, _, stderr2 := runCLI(t, "", "run")
	if code != 2 || !strings.Contains(stderr2, "sources.orders.dedupe.json") {
		t.Fatalf("worker boot: %d %q", code, stderr2)
	}
}

// An input stream or consumer that cannot serve the settings is a configuration conflict: the worker stops at once
// with exit status 2 and one line saying what conflicts. Before, DEDUPE_CONSUMER renamed on a work-queue INGEST
// (pipeline.ErrIncompatible) exited 1, as if the worker had failed while working.
func TestWorkerIncompatibleStreamOrConsumer(t *testing.T) {
	for _, c := range []struct {
		name     string
		consumer string // DEDUPE_CONSUMER; "": the default
		stream   jetstream.StreamConfig
		existing *jetstream.ConsumerConfig // on the stream before the worker starts
		want     string
		envelope bool // an envelope waits in the stream before the worker starts
	}{
		{"consumer renamed on a work-queue stream", "new",
			jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"}, Retention: jetstream.WorkQueuePolicy},
			&jetstream.ConsumerConfig{Durable: "old", AckPolicy: jetstream.AckExplicitPolicy},
			`run: consumer "new": INGEST is a work-queue stream and consumer "old" already reads it; a work-queue stream allows ` +
				`one consumer per subject — delete the old one (nats consumer rm INGEST old) or set DEDUPE_CONSUMER=old`, false},
		{"stream without the input subjects", "",
			jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"raw.>"}}, nil,
			`stream INGEST has subjects ["raw.>"], which do not capture ingest.*.*`, false},
		{"consumer without explicit acks", "",
			jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"}},
			&jetstream.ConsumerConfig{Durable: "dedupeworker", AckPolicy: jetstream.AckNonePolicy},
			"consumer INGEST > dedupeworker has ack policy AckNone; it must be explicit", false},
		{"no consumer on a stream that keeps processed envelopes", "",
			jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"}}, nil,
			"DEDUPE_CONSUMER_START", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := natstest.Run(t)
			nc := natstest.Connect(t, srv.URL())
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := js.CreateStream(ctx, c.stream); err != nil {
				t.Fatal(err)
			}
			if c.existing != nil {
				if _, err := js.CreateConsumer(ctx, c.stream.Name, *c.existing); err != nil {
					t.Fatal(err)
				}
			}
			if c.envelope {
				if _, err := js.Publish(ctx, "ingest.acme.github", []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("DEDUPE_NATS_URL", srv.URL())
			t.Setenv("DEDUPE_HTTP_ADDR", "")
			if c.consumer != "" {
				t.Setenv("DEDUPE_CONSUMER", c.consumer)
			}
			var stdout, stderr bytes.Buffer
			err := run(ctx, []string{"run"}, strings.NewReader(""), &stdout, &stderr)
			if ctx.Err() != nil {
				t.Fatalf("the worker retried until the test's deadline; logs:\n%s", stderr.String())
			}
			var errLine bytes.Buffer
			code := exitCode(err, &errLine)
			if code != exitUsage || !strings.Contains(errLine.String(), c.want) || strings.Count(errLine.String(), "\n") != 1 {
				t.Fatalf("exit %d\nstderr %q\nwant   %q", code, errLine.String(), c.want)
			}
		})
	}
}
