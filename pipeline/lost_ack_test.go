package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestLostFirstAckPastDuplicateWindow: the delivery that published first loses its ack, and the fleet is
// down for longer than the output's duplicate window; the redelivery must find the publish recorded in the claim
// and only ack. Before: the first publish was never recorded (MarkPublished only for redeliveries), so the
// redelivery took the live claim over and stored the event again — output held 2 copies.
func TestLostFirstAckPastDuplicateWindow(t *testing.T) {
	// Work-queue input (the default): the unconfirmed ack makes the worker record the publish. An input stream that
	// keeps acknowledged envelopes: every keyed publish is recorded before the ack.
	for _, keeps := range []bool{false, true} {
		t.Run(fmt.Sprintf("input keeps envelopes=%v", keeps), func(t *testing.T) { testLostFirstAck(t, keeps) })
	}
}

func testLostFirstAck(t *testing.T, keeps bool) {
	e := newAckDeniedEnv(t)
	e.shortDupWindow(time.Second)
	if keeps {
		e.keepingInput()
	}
	cfg := e.config(e.kvWindow())
	r := e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "first-ack-lost"), []byte("x"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	r.stop(t) // the fleet goes down before the ack wait (5s) redelivers the envelope
	// The outage outlasts the output's 1s duplicate window: a republish would be stored again.
	e.waitDupWindowPassed(e.messages(pipeline.DefaultOutputStream)[0], 20*time.Second)

	e2 := e.acksAllowed()
	cfg2 := e2.config(e2.kvWindow())
	e2.start(cfg2)
	e2.drained(20 * time.Second)
	if n := e2.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies after the first ack was lost past the duplicate window, want 1", n)
	}
}

// TestAckToDeletedConsumerCounted: an operator deletes the consumer between the publish and the ack; the
// ack vanishes. It must be counted as an ack failure, and the re-created consumer's delivery must not store the
// event again. Before: no failure was counted (ack_failures 0).
func TestAckToDeletedConsumerCounted(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	var once sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "deleted-consumer" {
			return
		}
		once.Do(func() {
			if err := e.js.DeleteConsumer(context.Background(), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
				t.Errorf("delete consumer: %v", err)
			}
		})
	})
	cfg := e.config(w)
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "deleted-consumer"), []byte("x"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if got := e.metric("dedupeworker_ack_failures_total"); got < 1 {
			return fmt.Errorf("ack failures %v", got)
		}
		return nil
	})
	e.drained(20 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies, want 1", n)
	}
}
