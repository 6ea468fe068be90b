package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestConsumerAckWaitLongerThanDupWindowFlagged: an operator edits the consumer's ack wait (nats consumer edit
// --wait) past the output's duplicate window. The server redelivers after the consumer's ack wait, not the worker's
// DEDUPE_ACK_WAIT, so an unkeyed event whose worker died after its publish is stored again on its redelivery,
// unmarked. dedupeworker_output_duplicate_window_short is the alert for exactly that; it must count the ack wait
// the server applies. Before: it compared the window with DEDUPE_ACK_WAIT only and stayed 0.
func TestConsumerAckWaitLongerThanDupWindowFlagged(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.start(cfg)
	natstest.Eventually(t, 10*time.Second, func() error {
		if w := e.metric("dedupeworker_output_duplicate_window_seconds"); w <= 0 {
			return fmt.Errorf("duplicate window not read yet")
		}
		return nil
	})
	if s := e.metric("dedupeworker_output_duplicate_window_short"); s != 0 {
		t.Fatalf("duplicate_window_short = %v before the edit, want 0", s)
	}
	window := time.Duration(e.metric("dedupeworker_output_duplicate_window_seconds") * float64(time.Second))
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	edited := info.Config
	edited.AckWait = window + time.Minute
	if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, edited); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if s := e.metric("dedupeworker_output_duplicate_window_short"); s != 1 {
			return fmt.Errorf("duplicate_window_short = %v with the consumer's ack wait (%s) past the window (%s), want 1",
				s, edited.AckWait, window)
		}
		return nil
	})
}
