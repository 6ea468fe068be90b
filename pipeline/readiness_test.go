package pipeline_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestReadyGaugeFollowsLastChange races window failures and recoveries on two goroutines: once they stop, the
// dedupeworker_ready gauge must say what Ready says at once. A gauge set from a readiness computed before another
// goroutine's change keeps the older answer until the next status poll (StatusInterval, 2s by default).
func TestReadyGaugeFollowsLastChange(t *testing.T) {
	e := newEnv(t)
	p, err := pipeline.Standing(e.config(memWindow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(context.Background()); err != nil {
		t.Fatalf("a standing pipeline must be ready: %v", err)
	}
	down := errors.New("pipeline test: window down")
	for round := range 3000 {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for range 5 {
					pipeline.WindowDown(p, down)
					pipeline.WindowUp(p)
				}
			})
		}
		wg.Wait()
		if err := p.Ready(context.Background()); err != nil {
			t.Fatalf("round %d: not ready after the last recovery: %v", round, err)
		}
		if g := e.metric("dedupeworker_ready"); g != 1 {
			t.Fatalf("round %d: dedupeworker_ready %v while Ready says ready", round, g)
		}
	}
}
