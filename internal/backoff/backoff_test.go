package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
)

func TestNext(t *testing.T) {
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: time.Second}
	for i, want := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, time.Second} {
		if got := b.Next(); got != want {
			t.Errorf("delay %d = %s, want %s", i, got, want)
		}
	}
	b.Reset()
	if got := b.Next(); got != 250*time.Millisecond {
		t.Errorf("after Reset: %s, want 250ms", got)
	}
}

func TestWaitCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Wait(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	b := backoff.Backoff{Min: time.Hour, Max: time.Hour}
	if b.Sleep(ctx) {
		t.Error("Sleep = true after cancel")
	}
}
