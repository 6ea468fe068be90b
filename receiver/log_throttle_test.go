package receiver_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// One line per kind and interval goes out; the next one says how many of its kind were left out since.
func TestLogThrottle(t *testing.T) {
	allow := receiver.LogThrottle(10 * time.Second)
	t0 := time.Unix(1_700_000_000, 0)
	for i, c := range []struct {
		kind    string
		at      time.Duration
		ok      bool
		skipped int
	}{
		{"a", 0, true, 0},
		{"a", time.Second, false, 0},
		{"b", time.Second, true, 0}, // kinds are throttled apart
		{"a", 9 * time.Second, false, 0},
		{"a", 10 * time.Second, true, 2},
		{"a", 11 * time.Second, false, 0},
		{"b", 30 * time.Second, true, 0},
		{"a", 30 * time.Second, true, 1},
		{"a", 40 * time.Second, true, 0},
	} {
		if ok, skipped := allow(c.kind, t0.Add(c.at)); ok != c.ok || skipped != c.skipped {
			t.Errorf("%d: allow(%s, +%s) = %v, %d; want %v, %d", i, c.kind, c.at, ok, skipped, c.ok, c.skipped)
		}
	}
}
