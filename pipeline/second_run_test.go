package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A second Run while one is active is refused, naming why, and leaves the first running.
func TestConcurrentRunRefused(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(memWindow()))
	err := r.p.Run(ctx(t))
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Run = %v, want an error saying Run is already running", err)
	}
	if err := r.p.Ready(context.Background()); err != nil {
		t.Errorf("first Run not ready after the refused second: %v", err)
	}
}

// stallWindow's records wait, whatever their context says, until stall is closed.
type stallWindow struct {
	pipeline.Window
	stall chan struct{}
	marks atomic.Int64
}

func (w *stallWindow) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, first time.Time) (uint64, bool, error) {
	w.marks.Add(1)
	<-w.stall
	return w.Window.MarkPublished(ctx, c, rev, first)
}

// A Run that returned with a worker still busy (its budget spent while the worker records a stored event) keeps
// the next Run of the same Pipeline from starting until that worker is done: the worker still uses the pipeline's
// answers subscription and counters, which the next Run sets up again. Before, the second Run started at once and
// set them up again under the first Run's worker, which then read them unsynchronised. Readiness says why it waits
// (before, it said only that the pipeline did not consume).
func TestSecondRunWaitsForFirstRunsWorkers(t *testing.T) {
	e := newEnv(t)
	e.keepingInput() // every keyed publish is recorded in its claim
	w := &stallWindow{Window: memWindow(), stall: make(chan struct{})}
	cfg := e.config(w)
	cfg.MaxInFlight = 1
	cfg.ShutdownTimeout = time.Second
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	release := func() {
		if released.CompareAndSwap(false, true) {
			close(w.stall)
		}
	}
	t.Cleanup(release)

	c1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- p.Run(c1) }()
	natstest.Eventually(t, 10*time.Second, func() error { return p.Ready(context.Background()) })
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "second-run"), nil)
	natstest.Eventually(t, 10*time.Second, func() error {
		if w.marks.Load() == 0 {
			return errors.New("the publish is not being recorded yet")
		}
		return nil
	})
	cancel1()
	select {
	case err := <-done1:
		if err != nil {
			t.Fatalf("first Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first Run did not return within 10s of its cancellation")
	}

	c2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- p.Run(c2) }()
	t.Cleanup(func() {
		cancel2()
		select {
		case err := <-done2:
			if err != nil {
				t.Errorf("second Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("second Run did not return after cancel")
		}
	})
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(e.log.String(), "waiting for the previous Run's workers") {
			return errors.New("the second Run does not say it waits for the first Run's worker")
		}
		return nil
	})
	if err := p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "waiting for the previous Run's workers to finish their shutdown") {
		t.Errorf("second Run, waiting for the first Run's worker: Ready = %v; want it to say it waits for them", err)
	}
	release()
	natstest.Eventually(t, 10*time.Second, func() error {
		if err := p.Ready(context.Background()); err != nil {
			return fmt.Errorf("second Run not ready: %w", err)
		}
		return nil
	})
	if got := e.count(pipeline.DefaultOutputStream); got != 1 {
		t.Errorf("%d events published, want 1", got)
	}
}
