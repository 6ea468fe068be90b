package kvwindow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestManagerWithLostShard: with a shard bucket deleted beside its siblings, New still refuses the window (a
// worker must not claim in it), but NewManager binds: Status reports the bucket lost and the others as they are,
// a key of the lost bucket fails with ErrWindowLost naming it while the others' keys answer, and List and
// ForgetAll act on the other buckets, then fail naming it. Before the fix NewManager failed as New does.
func TestManagerWithLostShard(t *testing.T) {
	s := natstest.Run(t)
	js := jsFor(t, s.URL())
	ctx := ctxT(t, 60*time.Second)
	byBucket := fill(t, newWindow(t, js, shardedConfig(4)), 40)
	const lost = "dedupe-window-02"
	if err := js.DeleteKeyValue(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if _, err := kvwindow.New(ctx, js, shardedConfig(4)); !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Fatalf("New with %s missing: %v, want ErrWindowLost", lost, err)
	}
	m, err := kvwindow.NewManager(ctx, js, shardedConfig(4))
	if err != nil {
		t.Fatalf("NewManager with %s missing: %v", lost, err)
	}
	defer m.Close()
	left := 40 - len(byBucket[lost])

	status, err := m.Status(ctx)
	if err != nil || len(status) != 4 {
		t.Fatalf("Status: %v, %+v", err, status)
	}
	keys := 0
	for _, b := range status {
		if (b.Bucket == lost) != strings.Contains(b.Lost, lost) {
			t.Errorf("Status of %s: lost %q", b.Bucket, b.Lost)
		}
		keys += int(b.Keys)
	}
	if keys != left {
		t.Errorf("Status: %d keys, want %d", keys, left)
	}

	if _, _, err := m.Get(ctx, "acme", "gh", byBucket[lost][0]); !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), lost) {
		t.Errorf("Get of a key of %s: %v, want ErrWindowLost naming it", lost, err)
	}
	if _, ok, err := m.Get(ctx, "acme", "gh", byBucket["dedupe-window-01"][0]); !ok || err != nil {
		t.Errorf("Get of a key of dedupe-window-01: %v, %v", ok, err)
	}

	entries, next, err := m.List(ctx, "acme", "gh", 0, kvwindow.MaxList)
	if len(entries) != left || next != 0 || !errors.Is(err, kvwindow.ErrWindowLost) || !strings.Contains(err.Error(), lost) {
		t.Errorf("List: %d entries (want %d), next %d, %v (want ErrWindowLost naming %s)", len(entries), left, next, err, lost)
	}
	n, err := m.ForgetAll(ctx, "acme", "")
	if n != left || !errors.Is(err, kvwindow.ErrWindowLost) {
		t.Errorf("ForgetAll: %d forgotten (want %d), %v (want ErrWindowLost)", n, left, err)
	}
}
