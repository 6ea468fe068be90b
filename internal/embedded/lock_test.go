package embedded_test

import (
	"context"
	"errors"
	"path/filepath"
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
	first, err := embedded.Start(embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := embedded.Start(embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
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
	again, err := embedded.Start(embedded.Config{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		t.Fatalf("after the first server stopped: %v", err)
	}
	if err := again.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
