package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A one-shot command meets a refused connection or an unknown host with one attempt, like the nats CLI, not ten
// seconds of retries.
func TestOneShotCommandsFailFast(t *testing.T) {
	for name, url := range map[string]string{
		"refused":      fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)),
		"unknown host": "nats://no-such-host.invalid:4222",
	} {
		t.Run(name, func(t *testing.T) {
			cleanNATSEnv(t)
			t.Setenv("DEDUPE_NATS_URL", url)
			for _, args := range [][]string{{"window", "status"}, {"dlq", "ls"}} {
				start := time.Now()
				code, _, stderr := runCLI(t, "", args...)
				// Under a second on an idle machine; a loaded one gets some slack. An unknown host takes what the
				// resolver takes to say so: only the single attempt is checked there.
				if elapsed := time.Since(start); name == "refused" && elapsed > 3*time.Second {
					t.Errorf("%v: took %s to fail", args, elapsed)
				}
				if code != 1 || strings.Contains(stderr, "retrying") || strings.Count(stderr, "\n") != 1 {
					t.Errorf("%v: exit %d, %q; want 1 and one line", args, code, stderr)
				}
			}
		})
	}
}

// Every one-shot command says that JetStream is missing in the words run and ingest use, not "no responders".
func TestOneShotCommandsSayJetStreamIsOff(t *testing.T) {
	cleanNATSEnv(t)
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.JetStream = false }))
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	for _, args := range [][]string{
		{"window", "get", "--idempotency-key", "a:s:k"},
		{"window", "ls", "--tenant", "a"},
		{"window", "status"},
		{"dlq", "ls"},
		{"dlq", "show", "1"},
		{"dlq", "replay"},
	} {
		code, _, stderr := runCLI(t, "", args...)
		cmd := args[0] + " " + args[1]
		if code != 1 || !strings.HasPrefix(stderr, cmd+": JetStream is not enabled on this server") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

// With no server configured, a one-shot command connects to the embedded server's address, and nothing listens
// there while no worker runs: the error says so and what to do, not only that no server was available.
func TestOneShotCommandsSayTheWorkerIsNotRunning(t *testing.T) {
	cleanNATSEnv(t)
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", t.TempDir()) // held by no worker
	for _, args := range [][]string{{"window", "ls", "--tenant", "acme"}, {"dlq", "ls"}} {
		code, _, stderr := runCLI(t, "", args...)
		if code != 1 || strings.Count(stderr, "\n") != 1 ||
			!strings.Contains(stderr, "no server listens there: the embedded server runs only inside the worker (make run, dedupeworker run)") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	// A server named explicitly and refused is not the worker's embedded server: no such hint.
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	if code, _, stderr := runCLI(t, "", "dlq", "ls"); code != 1 || strings.Contains(stderr, "embedded server runs") {
		t.Errorf("dlq ls against DEDUPE_NATS_URL: exit %d, %q", code, stderr)
	}
}
