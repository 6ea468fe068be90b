package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// shutdownWindow cancels the run from inside the record of a publish, and lets the record go on only once the
// shutdown has cancelled the in-flight work (cancelled reports it).
type shutdownWindow struct {
	pipeline.Window
	cancel    func()
	cancelled func() bool
	once      sync.Once
}

func (w *shutdownWindow) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, first time.Time) (uint64, bool, error) {
	w.once.Do(func() {
		w.cancel()
		// The scenario: the shutdown cancels the in-flight work between the PubAck and the record. A worker's
		// context here is one the shutdown cannot cancel: the pipeline's log says when it cancelled.
		for deadline := time.Now().Add(20 * time.Second); !w.cancelled() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond) // polling interval, not a wait for a condition
		}
	})
	return w.Window.MarkPublished(ctx, c, rev, first)
}

// TestShutdownBetweenPubAckAndAck: shutdown cancels the in-flight work after the output stored the event and
// before its record and ack. The record and the ack must still be sent, so that the redelivery (after the output's
// duplicate window) only acknowledges instead of publishing a marked second copy. Before: neither was sent (the
// record failed on the cancelled context, and the envelope was handed back).
func TestShutdownBetweenPubAckAndAck(t *testing.T) {
	e := newEnv(t)
	// An input stream that keeps acknowledged envelopes: the record comes between the PubAck and the ack.
	e.keepingInput()
	kv := e.kvWindow()
	w := &shutdownWindow{Window: kv}
	cfg := e.config(w)
	cfg.ShutdownTimeout = 4 * time.Second // in-flight work cancelled after 3 s; 1 s left for the record and the ack
	w.cancelled = func() bool { return strings.Contains(e.log.String(), "handing back envelopes still in flight") }
	r := e.start(cfg)
	w.cancel = r.cancel
	seq := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "shutdown-after-puback"), []byte("x"))
	select {
	case <-r.done:
		close(r.done)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	sent := func() error {
		entry, found, err := kv.Get(ctx(t), "t1", "gh", "shutdown-after-puback")
		if err != nil || !found || !entry.Published {
			return fmt.Errorf("claim after the shutdown: %+v found %v err %v; want the publish recorded", entry, found, err)
		}
		ci, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if ci.AckFloor.Stream < seq {
			return fmt.Errorf("consumer's ack floor %d, want the envelope %d acknowledged", ci.AckFloor.Stream, seq)
		}
		return nil
	}
	// Run waits for them within its budget: sent by the time it returns, unless it says it returned without its
	// workers (a machine too loaded to record and ack within the budget's last quarter), when they still go out.
	if err := sent(); err != nil {
		if !strings.Contains(e.log.String(), "workers still busy after their cancellation") {
			t.Fatalf("when Run returned: %v", err)
		}
		natstest.Eventually(t, 10*time.Second, sent)
	}
}
