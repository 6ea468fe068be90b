package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
)

// embeddedEnv configures the worker to start its embedded server on a free port, with everything else at its
// defaults; it returns the server's URL.
func embeddedEnv(t *testing.T) string {
	t.Helper()
	port := natstest.FreePort(t)
	for _, k := range []string{"DEDUPE_NATS_URL", "DEDUPE_SOURCES_FILE", "DEDUPE_SOURCES", "DEDUPE_MAX_JSON_BYTES", "DEDUPE_LOG_FORMAT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", port))
	t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", filepath.Join(t.TempDir(), "nats"))
	t.Setenv("DEDUPE_HTTP_ADDR", "")
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}

// jsonLines decodes every log line; it fails the test on a line that is not one JSON object.
func jsonLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func findLine(lines []map[string]any, msg string) (int, map[string]any) {
	for i, l := range lines {
		if l["msg"] == msg {
			return i, l
		}
	}
	return -1, nil
}

// With the embedded server at its defaults, a body one byte over DEDUPE_MAX_JSON_BYTES (default 1 MiB, which is
// also nats-server's own default max_payload) can be published, and a json-keyed source forwards it unkeyed with
// reason too-large; a body of exactly the limit is read and keyed. The JSON logs of the same run write durations
// as text, carry the whole configuration on the boot line, and say which signal stopped the worker.
func TestWorkerEmbeddedTooLargeAndJSONLogs(t *testing.T) {
	url := embeddedEnv(t)
	t.Setenv("DEDUPE_SOURCES", "sources: {orders: {dedupe: {json: id}}}")
	logs := &natstest.Buffer{}
	stop := startRun(t, logs, "run").stop
	waitConsuming(t, logs)
	nc := natstest.Connect(t, url)
	if got, want := nc.MaxPayload(), int64(8<<20); got != want {
		t.Fatalf("embedded max_payload %d, want %d", got, want)
	}
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := func(id string, size int) []byte {
		b := []byte(`{"id":"` + id + `","pad":"`)
		b = append(b, bytes.Repeat([]byte("x"), size-len(b)-2)...)
		return append(b, `"}`...)
	}
	for _, b := range [][]byte{body("fits", keys.DefaultMaxJSONBytes), body("over", keys.DefaultMaxJSONBytes+1)} {
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "ingest.acme.orders", Data: b}); err != nil {
			t.Fatalf("publish %d bytes: %v", len(b), err)
		}
	}
	out := readOutputs(t, js, 2)
	byStatus := map[string]*nats.Msg{}
	for _, m := range out {
		byStatus[m.Header.Get("Dedupe-Status")] = m
	}
	if m := byStatus["unique"]; m == nil || m.Header.Get("Idempotency-Key") != "acme:orders:fits" || len(m.Data) != keys.DefaultMaxJSONBytes {
		t.Errorf("body of exactly the limit: %+v", m)
	}
	if m := byStatus["unkeyed"]; m == nil || m.Header.Get("Dedupe-Reason") != "too-large" || len(m.Data) != keys.DefaultMaxJSONBytes+1 {
		t.Errorf("body one byte over the limit: %+v", m)
	}
	nc.Close()

	if err := stop(signalCause{syscall.SIGTERM}); err != nil {
		t.Fatalf("run: %v", err)
	}
	lines := jsonLines(t, logs.String())
	_, boot := findLine(lines, "starting dedupeworker")
	cfg, _ := boot["config"].(map[string]any)
	for k, v := range map[string]any{"DEDUPE_ACK_WAIT": "30s", "DEDUPE_SHUTDOWN_TIMEOUT": "30s", "DEDUPE_DEFAULT_TTL": "72h",
		"DEDUPE_MAX_JSON_BYTES": float64(1 << 20), "DEDUPE_INPUT_STREAM": "INGEST", "DEDUPE_PROVISION": true} {
		if cfg[k] != v {
			t.Errorf("boot line: config.%s = %#v, want %#v (the JSON boot line carries every setting)", k, cfg[k], v)
		}
	}
	if boot["version"] == nil || boot["go"] == nil {
		t.Errorf("boot line lacks version or go: %v", boot)
	}
	if _, l := findLine(lines, "pipeline: created consumer"); l == nil || l["ack_wait"] != "30s" {
		t.Errorf("durations in JSON logs: ack_wait = %#v, want \"30s\"", l["ack_wait"])
	}
	iStop, _ := findLine(lines, "stopping: received SIGTERM")
	iStopped, _ := findLine(lines, "stopped")
	if iStop < 0 || iStopped < iStop {
		t.Errorf("want \"stopping: received SIGTERM\" and then \"stopped\":\n%s", logs.String())
	}
	if i, _ := findLine(lines, "stopping: input consumption ended"); i >= 0 {
		t.Errorf("a stop by signal is reported as the input ending:\n%s", logs.String())
	}
}

// TestMainProcess is not a test: TestMainSignals runs the test binary as the dedupeworker process through it.
func TestMainProcess(t *testing.T) {
	if os.Getenv("DEDUPEWORKER_TEST_MAIN") != "1" {
		t.Skip("runs only as the worker process of TestMainSignals")
	}
	os.Args = []string{"dedupeworker", "run"}
	main()
}

// main turns SIGTERM and SIGINT into a graceful stop that logs the signal and exits 0.
func TestMainSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(signalName(sig), func(t *testing.T) {
			embeddedEnv(t)
			t.Setenv("DEDUPE_LOG_FORMAT", "json")
			cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$")
			cmd.Env = append(os.Environ(), "DEDUPEWORKER_TEST_MAIN=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			lines := make(chan string, 100)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			var all []string
			deadline := time.After(30 * time.Second)
			for consuming := false; !consuming; {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("worker exited before consuming:\n%s", strings.Join(all, "\n"))
					}
					all = append(all, l)
					consuming = strings.Contains(l, `"pipeline: consuming"`)
				case <-deadline:
					t.Fatalf("worker not consuming after 30s:\n%s", strings.Join(all, "\n"))
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for l := range lines {
				all = append(all, l)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, strings.Join(all, "\n"))
			}
			got := jsonLines(t, strings.Join(all, "\n"))
			iStop, _ := findLine(got, "stopping: received "+signalName(sig))
			iStopped, _ := findLine(got, "stopped")
			if iStop < 0 || iStopped < iStop {
				t.Fatalf("want \"stopping: received %s\" and then \"stopped\":\n%s", signalName(sig), strings.Join(all, "\n"))
			}
		})
	}
}

// A second worker started with another DEDUPE_EMBEDDED_LISTEN on the same DEDUPE_EMBEDDED_STORE_DIR refuses to
// start, exit status 2, naming the directory and the running server; before the lock it started a second
// JetStream server on the directory (exit status 0 when stopped, both "consuming").
func TestWorkerEmbeddedStoreDirLocked(t *testing.T) {
	url := embeddedEnv(t)
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	logs, stop := startWorker(t)
	waitConsuming(t, logs)
	dir := os.Getenv("DEDUPE_EMBEDDED_STORE_DIR")
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, []string{"run"}, strings.NewReader(""), &out, &errb)
	code := exitCode(err, &errb)
	if code != 2 || !strings.Contains(errb.String(), "run: store directory "+dir+" is in use by another embedded server") ||
		!strings.Contains(errb.String(), "DEDUPE_NATS_URL="+url) {
		t.Errorf("second worker on %s: exit %d (want 2)\n%s", dir, code, errb.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
