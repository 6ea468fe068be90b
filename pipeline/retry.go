package pipeline

import (
	"sync"
	"time"
)

// waitFor reports whether ch is closed, waiting at most d for it.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch: // closed already: true even when d has passed (a select on both would pick either)
		return true
	default:
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// rateLog lets one log line through every logEvery and counts what it held back.
type rateLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const logEvery = 5 * time.Second

func (r *rateLog) allow() (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.last) < logEvery {
		r.suppressed++
		return false, 0
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return true, n
}
