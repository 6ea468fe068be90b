package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

func TestPlanShutdown(t *testing.T) {
	for _, c := range []struct {
		budget, drain, cancel time.Duration
	}{
		{25 * time.Second, 5 * time.Second, 20 * time.Second}, // DEDUPE_SHUTDOWN_TIMEOUT 30s less the worker's 5s
		{55 * time.Second, 5 * time.Second, 50 * time.Second},
		{8 * time.Second, 5 * time.Second, 6 * time.Second},
		{4 * time.Second, 3 * time.Second, 3 * time.Second},
		{200 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond},
		{0, 0, 0},            // no budget left: every step at once
		{-time.Second, 0, 0}, // a budget already overspent: the same, never steps out of order
	} {
		drain, cancel, end := pipeline.PlanShutdown(c.budget)
		if drain != c.drain || cancel != c.cancel || end != max(c.budget, 0) {
			t.Errorf("PlanShutdown(%s) = drain %s, cancel %s, end %s; want %s, %s, %s",
				c.budget, drain, cancel, end, c.drain, c.cancel, max(c.budget, 0))
		}
		if drain > cancel || cancel > end {
			t.Errorf("PlanShutdown(%s): steps out of order: %s, %s, %s", c.budget, drain, cancel, end)
		}
	}
}

// A delivery the handler receives after the stop is handed back, even with a worker idle to take it. Before, the
// handler's select picked at random between the idle worker and the hand-back: about half were started.
func TestDeliveryAfterStopHandedBack(t *testing.T) {
	if got := pipeline.HandOversAfterStop(200); got != 0 {
		t.Errorf("%d of 200 deliveries received after the stop were given to an idle worker, want none", got)
	}
}

// deafWindow's claims never answer, whatever their context says, until the test ends.
type deafWindow struct {
	pipeline.Window
	deaf   chan struct{}
	claims atomic.Int64
}

func (w *deafWindow) Claim(context.Context, kvwindow.Claim, kvwindow.Known) (kvwindow.Outcome, error) {
	w.claims.Add(1)
	<-w.deaf
	return kvwindow.Outcome{}, kvwindow.ErrUnavailable
}

// Run returns within ShutdownTimeout counted from the cancellation of its context, even with every worker stuck
// in a window call that ignores it, and acknowledges none of the envelopes stuck. Before, the budget started only
// after the pull subscription's drain, and Run then waited 10s more for the workers it had cancelled.
func TestShutdownWithinBudgetFromStop(t *testing.T) {
	e := newEnv(t)
	w := &deafWindow{Window: memWindow(), deaf: make(chan struct{})}
	cfg := e.config(w)
	cfg.MaxInFlight = 4
	cfg.ShutdownTimeout = 2 * time.Second
	r := e.start(cfg)
	t.Cleanup(func() { close(w.deaf) }) // after start's: runs before its stop
	for i := range 12 {                 // every worker stuck, some pulled and waiting
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "deaf-"+strconv.Itoa(i)), nil)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if n := w.claims.Load(); n < int64(cfg.MaxInFlight) {
			return fmt.Errorf("%d workers in a claim, want %d", n, cfg.MaxInFlight)
		}
		return nil
	})
	stop := time.Now()
	r.cancel()
	// The slack is for a loaded machine; the overshoot this catches is 10s.
	bound := cfg.ShutdownTimeout + 2*time.Second
	select {
	case err := <-r.done:
		close(r.done)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Until(stop.Add(bound))):
		t.Fatalf("Run has not returned %s after the stop, with a shutdown timeout of %s", bound, cfg.ShutdownTimeout)
	}
	t.Logf("Run returned %s after the stop", time.Since(stop).Round(time.Millisecond))
	if info, err := e.consumerInfo(); err != nil || info.AckFloor.Stream != 0 {
		t.Errorf("acknowledged at shutdown: %+v %v", info, err)
	}
	if got := e.count(pipeline.DefaultOutputStream); got != 0 {
		t.Errorf("%d events published, want none (no claim answered)", got)
	}
}
