package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestDeliveryLimitStrandsEnvelope pins a stated condition (docs/failures.md, "The consumer re-created or edited by
// an operator"): a delivery limit set on the consumer (nats consumer edit --max-deliver) strands an envelope that
// reaches it. Every NAK counts as a delivery, so a window outage of seconds reaches a limit of a few. A work-queue
// INGEST keeps the envelope, but the consumer never delivers it again, not even once the limit is raised, and counts
// it neither pending nor awaiting its ack. The way out is to delete the consumer: the worker creates it again, and
// the new consumer delivers what INGEST holds.
func TestDeliveryLimitStrandsEnvelope(t *testing.T) {
	e := newEnv(t)
	mw := memWindow()
	cfg := e.config(mw)
	e.start(cfg)
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	edited := info.Config
	edited.MaxDeliver = 2
	if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, edited); err != nil {
		t.Fatal(err)
	}
	mw.SetUnavailable(true)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "limit-1"), []byte("a"))
	natstest.Eventually(t, 15*time.Second, func() error {
		if n := e.metric("dedupeworker_naks_total", "reason", pipeline.NakWindow); n < 2 {
			return fmt.Errorf("window NAKs %v, want the envelope's 2 deliveries handed back", n)
		}
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("consumer pending %d, awaiting ack %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	mw.SetUnavailable(false)
	edited.MaxDeliver = -1 // raising the limit does not bring the envelope back
	if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, edited); err != nil {
		t.Fatal(err)
	}
	if n := e.count(pipeline.DefaultInputStream); n != 1 {
		t.Fatalf("INGEST holds %d envelopes, want the stranded one", n)
	}
	if info, err := e.consumerInfo(); err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
		t.Fatalf("consumer after the limit was raised: %+v %v; want nothing pending: the condition docs/failures.md "+
			"states has changed: update it", info, err)
	}

	// The way out: delete the consumer; the worker creates it again and the envelope is published.
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	e.waitCount(pipeline.DefaultOutputStream, 1, 15*time.Second)
}
