package embedded_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/embedded"
)

// One embedded server per store directory: a second Start on the same directory, listening elsewhere, is refused
// with an error naming the directory and the server that holds it, and the directory is free again once the first
// server has shut down. Before the lock, the second server started (err nil) and rebuilt the first one's streams
// beside it ("stream state outdated … will rebuild").
func TestOneServerPerStoreDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	first, err := embedded.Start(context.Background(), embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := embedded.Start(context.Background(), embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err == nil {
		_ = second.Shutdown(context.Background())
		_ = first.Shutdown(context.Background())
		t.Fatalf("a second server started on store directory %s (err nil); want it refused", dir)
	}
	if !errors.Is(err, embedded.ErrStoreInUse) {
		t.Errorf("error %v does not wrap ErrStoreInUse", err)
	}
	for _, want := range []string{"embedded: store directory " + dir + " is in use by another embedded server",
		"listening on " + strings.TrimPrefix(first.ClientURL(), "nats://"), "DEDUPE_EMBEDDED_STORE_DIR", "DEDUPE_NATS_URL=" + first.ClientURL()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := embedded.Start(context.Background(), embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("after the first server stopped: %v", err)
	}
	if err := again.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// Start waits for the server as long as its context lives (a large store takes seconds per million window keys to
// recover before the server accepts connections), and when the context ends first it stops the server before it
// lets go of the store: a worker stopped while its embedded server recovers starts again on the same directory.
func TestStartEndsWithItsContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv, err := embedded.Start(ctx, embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err == nil {
		_ = srv.Shutdown(context.Background())
		t.Fatal("Start with an ended context: no error")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start with an ended context: %v; want context.Canceled, naming the store", err)
	}
	again, err := embedded.Start(context.Background(), embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("Start again on the same store: %v", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := again.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
}

// A server that fails to start (here JetStream cannot make its directory) ends Start with the server's own reason
// at once, not after the wait for a recovery that never comes.
func TestStartFailsWhenTheServerCannotStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jetstream"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	srv, err := embedded.Start(ctx, embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err == nil {
		_ = srv.Shutdown(context.Background())
		t.Fatal("Start over a store JetStream cannot use: no error")
	}
	if took := time.Since(start); took > 10*time.Second || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("Start: %v after %s; want the server's reason (JetStream) at once", err, took.Round(time.Millisecond))
	}
}

// A Start whose context ends before its server is ready returns only once that server's own start has returned.
// nats-server's Start carries on after a Shutdown that comes before it returns (it enables JetStream in the store),
// so Start waits for it before it stops the server and unlocks the store. Before, a second server started on the
// same directory could find the first one still creating and removing its directories ("Can't start JetStream:
// could not create storage streams directory" in TestStartEndsWithItsContext).
func TestStartEndedLeavesNoServerRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv, err := embedded.Start(ctx, embedded.Config{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err == nil {
		_ = srv.Shutdown(context.Background())
		t.Fatal("Start with an ended context: no error")
	}
	if g := serverGoroutines("(*Server).Start("); g != "" {
		t.Fatalf("the server is still starting after Start returned %v:\n%s", err, g)
	}
}

// serverGoroutines is the stacks of the goroutines in nats-server's function fn, or "".
func serverGoroutines(fn string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var running []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "nats-server/v2/server."+fn) {
			running = append(running, g)
		}
	}
	return strings.Join(running, "\n\n")
}
