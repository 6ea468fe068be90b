package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// shutdownWindow cancels the run from inside the record of a publish, and lets the record go on only once the
// shutdown timeout has cancelled the in-flight work.
type shutdownWindow struct {
	pipeline.Window
	cancel  func()
	timeout time.Duration
	once    sync.Once
}

func (w *shutdownWindow) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, first time.Time) (uint64, bool, error) {
	w.once.Do(func() {
		w.cancel()
		// The scenario: the shutdown timeout passes between the PubAck and the record (no condition to poll: a
		// worker's context that shutdown cannot cancel never ends here).
		select {
		case <-ctx.Done():
		case <-time.After(w.timeout + time.Second):
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
	cfg.ShutdownTimeout = 200 * time.Millisecond
	w.timeout = cfg.ShutdownTimeout
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
	entry, found, err := kv.Get(ctx(t), "t1", "gh", "shutdown-after-puback")
	if err != nil || !found || !entry.Published {
		t.Errorf("claim after the shutdown: %+v found %v err %v; want the publish recorded", entry, found, err)
	}
	ci, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if ci.AckFloor.Stream < seq {
		t.Errorf("consumer's ack floor %d, want the envelope %d acknowledged", ci.AckFloor.Stream, seq)
	}
}
