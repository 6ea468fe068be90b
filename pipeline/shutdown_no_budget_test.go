package pipeline_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A shutdown whose budget is spent before its drain starts still hands back every delivery pulled but not started
// (NAK): none is left to wait for its ack wait, and nothing is acknowledged. The workers stuck in claims keep theirs.
func TestShutdownWithoutBudgetHandsBackPulled(t *testing.T) {
	e := newEnv(t)
	w := &deafWindow{Window: memWindow(), deaf: make(chan struct{})}
	cfg := e.config(w)
	cfg.MaxInFlight = 4
	cfg.AckWait = 30 * time.Second // far beyond the test: only a hand-back makes a delivery available again
	cfg.ShutdownTimeout = time.Millisecond
	r := e.start(cfg)
	t.Cleanup(func() { close(w.deaf) }) // after start's: runs before its stop
	const n = 12
	for i := range n {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "late-"+strconv.Itoa(i)), nil)
	}
	natstest.Eventually(t, 10*time.Second, func() error { // every worker stuck, a batch pulled behind them
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if stuck := w.claims.Load(); stuck < int64(cfg.MaxInFlight) || info.NumAckPending <= int(stuck) {
			return fmt.Errorf("%d workers in a claim, %d deliveries pulled", stuck, info.NumAckPending)
		}
		return nil
	})
	r.stop(t)

	c, err := e.js.Consumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range b.Messages() {
		got++
	}
	if want := n - int(w.claims.Load()); got != want {
		t.Errorf("%d envelopes available again at once after the stop, want %d (all but those stuck in claims)", got, want)
	}
	if info, err := e.consumerInfo(); err != nil || info.AckFloor.Stream != 0 {
		t.Errorf("acknowledged at shutdown: %+v %v", info, err)
	}
}
