package embedded_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/embedded"
)

// A one-shot command asks StoreHeld whether a worker holds the store (to say "still starting" rather than "start
// the worker"). Its probe takes the lock for a moment: a worker locking the store in that moment must not be
// refused as if another server held it ("in use by another embedded server (pid …)"), which failed its start.
func TestStoreHeldProbeDoesNotRefuseAStartingServer(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	release, err := embedded.LockStore(dir) // create the lock file, then free it
	if err != nil {
		t.Fatal(err)
	}
	release()
	var stop atomic.Bool
	probing := make(chan struct{})
	go func() {
		defer close(probing)
		for !stop.Load() {
			embedded.StoreHeld(dir)
		}
	}()
	defer func() { stop.Store(true); <-probing }()
	for i := range 500 {
		release, err := embedded.LockStore(dir)
		if err != nil {
			t.Fatalf("lock %d refused while only a probe looked: %v", i, err)
		}
		release()
	}
}
