package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// startCountingWorker runs a worker on a fresh server with one GitHub source and returns a JetStream client of
// that server, the worker's logs and its metrics URL, once the worker is ready.
func startCountingWorker(t *testing.T) (jetstream.JetStream, *natstest.Buffer, string) {
	t.Helper()
	srv := natstest.Run(t)
	httpPort := natstest.FreePort(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_HTTP_ADDR", fmt.Sprintf("127.0.0.1:%d", httpPort))
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("DEDUPE_SOURCES", "sources: {gh: {dedupe: github}}")
	t.Setenv("DEDUPE_COUNT_COPIES", "true")
	logs, _ := startWorker(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	waitHTTP(t, base+"/readyz", http.StatusOK)
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return js, logs, base + "/metrics"
}

// deliverThrice publishes one GitHub delivery three times, as a provider retrying it does, and waits until the
// worker has acknowledged all three: one published, two counted as duplicates.
func deliverThrice(t *testing.T, js jetstream.JetStream, metrics, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		m := nats.NewMsg("ingest.acme.gh")
		m.Header.Set("X-GitHub-Delivery", id)
		m.Data = fmt.Appendf(nil, `{"attempt":%d}`, i)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 30*time.Second, func() error {
		body := waitHTTP(t, metrics, http.StatusOK)
		for _, want := range []string{`dedupeworker_envelopes_total{outcome="unique",source="gh"} 1`,
			`dedupeworker_envelopes_total{outcome="duplicate",source="gh"} 2`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("metrics lack %q", want)
			}
		}
		return nil
	})
}

func windowGetClaim(t *testing.T, key string) map[string]any {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", key)
	if code != 0 {
		t.Fatalf("window get: exit %d: %s", code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v["claimed"] != true {
		t.Fatalf("window get: %v: %s", err, stdout)
	}
	return v
}

// One event delivered three times: window get shows the claim and the two copies it suppressed, in a window of
// one bucket and in one of four shards (one counter stream for all of them).
func TestWindowGetShowsSuppressedCopies(t *testing.T) {
	for _, shards := range []string{"1", "4"} {
		t.Run("shards="+shards, func(t *testing.T) {
			t.Setenv("DEDUPE_WINDOW_SHARDS", shards)
			testWindowGetShowsSuppressedCopies(t)
		})
	}
}

func testWindowGetShowsSuppressedCopies(t *testing.T) {
	js, logs, metrics := startCountingWorker(t)
	deliverThrice(t, js, metrics, "d1")
	// The counts are sent after the acks, without waiting: poll.
	var got map[string]any
	natstest.Eventually(t, 20*time.Second, func() error {
		got = windowGetClaim(t, "d1")
		if got["copies_suppressed"] != float64(2) {
			return fmt.Errorf("copies_suppressed %v (%v), want 2", got["copies_suppressed"], got["copies_suppressed_unknown"])
		}
		return nil
	})
	if _, ok := got["copies_suppressed_unknown"]; ok {
		t.Errorf("window get: a known count with a reason it is unknown: %v", got)
	}
	// Another event's claim counts its own copies: none.
	deliverOnce := nats.NewMsg("ingest.acme.gh")
	deliverOnce.Header.Set("X-GitHub-Delivery", "d2")
	if _, err := js.PublishMsg(context.Background(), deliverOnce); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() error {
		code, stdout, _ := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", "d2")
		if code != 0 || !strings.Contains(stdout, `"claimed":true`) {
			return fmt.Errorf("d2 not claimed yet: %s", stdout)
		}
		if !strings.Contains(stdout, `"copies_suppressed":0`) {
			t.Fatalf("d2: %s", stdout)
		}
		return nil
	})
	if strings.Contains(logs.String(), "not counted") {
		t.Errorf("worker logged uncounted copies:\n%s", logs.String())
	}
}

// Without the counter stream (deleted by an operator, or never created) the worker deduplicates and acknowledges
// as before, says once that it does not count, and window get says the count is unknown instead of failing.
func TestWindowGetCopiesUnknownWithoutCounterStream(t *testing.T) {
	js, logs, metrics := startCountingWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, "dedupe-window-copies"); err != nil {
		t.Fatalf("the worker did not create the counter stream: %v", err)
	}
	deliverThrice(t, js, metrics, "d1")
	natstest.Eventually(t, 20*time.Second, func() error {
		info, err := js.Stream(ctx, "INGEST")
		if err != nil {
			return err
		}
		if n := info.CachedInfo().State.Msgs; n != 0 {
			return fmt.Errorf("INGEST holds %d envelopes: not all acknowledged", n)
		}
		return nil
	})
	const warn = "pipeline: counter stream missing"
	natstest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(logs.String(), warn) {
			return fmt.Errorf("no %q in the log yet", warn)
		}
		return nil
	})
	got := windowGetClaim(t, "d1")
	if got["copies_suppressed"] != nil || !strings.Contains(fmt.Sprint(got["copies_suppressed_unknown"]), "dedupe-window-copies does not exist") {
		t.Errorf("window get: %v", got)
	}
	if out := readOutputs(t, js, 1); len(out) != 1 {
		t.Errorf("DEDUPED holds %d events, want 1", len(out))
	}
	if n := strings.Count(logs.String(), warn); n != 1 {
		t.Errorf("%q logged %d times, want once:\n%s", warn, n, logs.String())
	}
}
