//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A one-shot command refused at the embedded server's address while a worker holds the store directory (its
// server still starting, or recovering its streams before it listens) says so, instead of advising to start the
// worker that runs. Before, it said "start the worker".
func TestOneShotCommandsSayTheWorkerIsStillStarting(t *testing.T) {
	cleanNATSEnv(t)
	dir := filepath.Join(t.TempDir(), "nats")
	t.Setenv("DEDUPE_EMBEDDED_LISTEN", fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_EMBEDDED_STORE_DIR", dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The lock a worker's embedded server takes, and keeps from before its start to after its stop.
	lock, err := os.OpenFile(filepath.Join(dir, "dedupeworker.lock"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "", "dlq", "ls")
	if code != 1 || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "start the worker") ||
		!strings.Contains(stderr, "a worker holds the store directory "+dir) ||
		!strings.Contains(stderr, "still starting or recovering its streams") {
		t.Errorf("dlq ls while a worker holds the store: exit %d, %q; want the worker said to be starting", code, stderr)
	}
	// Once the worker has let the store go, the hint is today's again.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "", "dlq", "ls"); code != 1 || !strings.Contains(stderr, "start the worker") {
		t.Errorf("dlq ls with the store free: exit %d, %q; want 'start the worker'", code, stderr)
	}
}
