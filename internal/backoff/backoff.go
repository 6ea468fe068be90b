// Package backoff is the one retry delay of the project: a capped exponential delay, doubling from Min to Max,
// and the wait that a cancelled context cuts short.
package backoff

import (
	"context"
	"time"
)

// Backoff is a capped exponential delay for a retry loop. The zero value of cur starts at Min. It is not safe for
// concurrent use: a loop owns its Backoff.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the next delay: Min first, then twice the last one, at most Max.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur
}

// Reset starts again from Min: the retried operation succeeded.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits for the next delay; false when ctx was done first.
func (b *Backoff) Sleep(ctx context.Context) bool { return Wait(ctx, b.Next()) == nil }

// Wait waits d, or until ctx is done (its error).
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
