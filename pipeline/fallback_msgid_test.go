package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// downAfterFirstClaim is a window that answers its first claim and is unreachable from then on.
type downAfterFirstClaim struct {
	pipeline.Window
	claims atomic.Int64
}

var errTestWindowDown = fmt.Errorf("%w: test: window down", kvwindow.ErrUnavailable)

func (w *downAfterFirstClaim) Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error) {
	if w.claims.Add(1) > 1 {
		return kvwindow.Outcome{}, errTestWindowDown
	}
	return w.Window.Claim(ctx, c, known)
}

func (w *downAfterFirstClaim) MarkPublished(context.Context, kvwindow.Claim, uint64, time.Time) (uint64, bool, error) {
	return 0, false, errTestWindowDown
}

// TestForwardedRedeliveryCollapses: with ForwardWhenWindowDown, an envelope whose event was stored by an earlier
// delivery (keyed, its record failed as the window went down: handed back) and whose redelivery finds the window
// still down is forwarded unkeyed. Every delivery of an envelope publishes under one Nats-Msg-Id, so the output's
// duplicate window collapses the second publish. Before, the fallback published under its unkeyed id and the
// output held the envelope twice within a second.
func TestForwardedRedeliveryCollapses(t *testing.T) {
	e := newEnv(t)
	e.keepingInput() // records before its ack: a failed record hands the envelope back
	cfg := e.config(&downAfterFirstClaim{Window: e.kvWindow()})
	cfg.ForwardWhenWindowDown = true
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "fc-1"), []byte("x"))
	e.drained(15 * time.Second)
	if n := e.metric("dedupeworker_naks_total", "reason", "record-failed"); n != 1 {
		t.Fatalf("record NAKs %v, want 1 (the first delivery stored the event and was handed back)", n)
	}
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 {
		for _, m := range out {
			t.Logf("output: Nats-Msg-Id %s, Dedupe-Status %s", header(t, m, "Nats-Msg-Id"), header(t, m, "Dedupe-Status"))
		}
		t.Fatalf("output holds the envelope %d times, want once", len(out))
	}
}
