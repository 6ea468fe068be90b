package receiver

import (
	"sync"
	"time"
)

// throttle lets one log line of each kind through per interval and counts the others, so that an outage or a
// flood of forged requests costs a line every few seconds, not one per request. Kinds are few (fixed names and
// declared sources).
type throttle struct {
	every time.Duration

	mu    sync.Mutex
	kinds map[string]throttled
}

type throttled struct {
	next    time.Time // when the next line may go out
	skipped int       // lines left out since the last one
}

// allow reports whether a line of kind may be logged at now, and how many were left out before it.
func (t *throttle) allow(kind string, now time.Time) (ok bool, skipped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kinds == nil {
		t.kinds = map[string]throttled{}
	}
	k := t.kinds[kind]
	if now.Before(k.next) {
		k.skipped++
		t.kinds[kind] = k
		return false, 0
	}
	t.kinds[kind] = throttled{next: now.Add(t.every)}
	return true, k.skipped
}
