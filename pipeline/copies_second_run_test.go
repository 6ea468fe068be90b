package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestCopiesCountedOnSecondRun: a Run that ends while the increment proving the count works awaits its answer
// (the counter's subscription ends with it, the answer never comes) must not leave the next Run of the same
// Pipeline waiting for that answer. Before, the second Run queued every copy behind the lost increment and never
// sent one.
func TestCopiesCountedOnSecondRun(t *testing.T) {
	const copiesStream = "COPIES"
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.CopiesStream = copiesStream
	cfg.PublishTimeout = 30 * time.Second // the lost increment's answer (a timeout) is not due during the test
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := func() (stop func()) {
		c, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(c) }()
		natstest.Eventually(t, 10*time.Second, func() error { return p.Ready(context.Background()) })
		var stopped bool
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
		}
		t.Cleanup(stop)
		return stop
	}

	// First run: the counter stream captures nothing, and a subscriber that never answers takes the increments.
	stop := run()
	s, err := e.js.Stream(ctx(t), copiesStream)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	subjects := sc.Subjects
	sc.Subjects = []string{"elsewhere.>"}
	if _, err := e.js.UpdateStream(ctx(t), sc); err != nil {
		t.Fatal(err)
	}
	silent, err := e.nc.SubscribeSync(copiesStream + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "counted"), []byte("x"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "counted"), []byte("x"))
	if _, err := silent.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no increment sent for the copy: %v", err)
	}
	stop() // the increment still awaits its answer

	// Second run of the same Pipeline, the counter stream as it should be.
	if err := silent.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	sc.Subjects = subjects
	if _, err := e.js.UpdateStream(ctx(t), sc); err != nil {
		t.Fatal(err)
	}
	run()
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "counted"), []byte("x"))
	natstest.Eventually(t, 15*time.Second, func() error {
		n, err := e.tryCount(copiesStream)
		if err != nil {
			return err
		}
		if n == 0 {
			if e.metric("dedupeworker_envelopes_total", "outcome", pipeline.OutcomeDuplicate) < 2 {
				return errors.New("the second copy not acknowledged yet")
			}
			return fmt.Errorf("%s holds no count after the second run's copy", copiesStream)
		}
		return nil
	})
}
