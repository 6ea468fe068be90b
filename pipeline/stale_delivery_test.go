package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// lowerOutputLimit makes the output stream refuse messages over size bytes for good.
func (e *env) lowerOutputLimit(size int32) error {
	st, err := e.js.Stream(context.Background(), pipeline.DefaultOutputStream)
	if err != nil {
		return err
	}
	sc := st.CachedInfo().Config
	sc.MaxMsgSize = size
	_, err = e.js.UpdateStream(context.Background(), sc)
	return err
}

// TestStaleDeliveryNeverAcksUnderLaterHolder: a delivery claims, stalls past the ack wait; the redelivery takes the
// claim over; the output's limits are lowered, so the stalled delivery's publish is refused and it dead-letters.
// Its release finds the key moved on (the redelivery holds it, undecided): it must not acknowledge, or the
// envelope leaves the work-queue input while the redelivery still holds the claim, and a copy elsewhere would take
// the holder's absence for "published". Before: the stalled delivery acknowledged (the input held 0 envelopes
// while the redelivery held the claim).
func TestStaleDeliveryNeverAcksUnderLaterHolder(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	cfg := e.config(w)
	cfg.AckWait = 2 * time.Second
	first, measured := make(chan struct{}), make(chan struct{})
	var inputWhileHeld atomic.Int64
	inputWhileHeld.Store(-1)
	var once sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "stalled" {
			return
		}
		switch c.Delivery.Count {
		case 1:
			<-first // stalled past the ack wait, after its claim
		case 2:
			once.Do(func() {
				if out.Status != kvwindow.Owned {
					t.Errorf("redelivery's claim: %v, want owned (a takeover)", out.Status)
				}
				if err := e.lowerOutputLimit(2048); err != nil {
					t.Errorf("update output stream: %v", err)
				}
				close(first)
				// The redelivery holds the claim, undecided, until the stalled delivery is finished.
				natstest.Eventually(t, 10*time.Second, func() error {
					if e.metric("dedupeworker_envelopes_total", "outcome", "dead-letter") > 0 ||
						e.metric("dedupeworker_stale_deliveries_total") > 0 {
						return nil
					}
					return errors.New("the stalled delivery is not finished")
				})
				n, err := e.tryCount(pipeline.DefaultInputStream)
				if err != nil {
					t.Error(err)
				}
				inputWhileHeld.Store(int64(n))
				close(measured)
			})
		default:
			// A third delivery (a loaded machine let the ack wait pass again) waits until the input was counted.
			select {
			case <-measured:
			case <-time.After(20 * time.Second):
			}
		}
	})
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "stalled"), []byte(strings.Repeat("b", 3000)))
	e.drained(30 * time.Second)
	if n := inputWhileHeld.Load(); n != 1 {
		t.Errorf("input held %d envelopes while the redelivery held the claim undecided, want 1 (the stalled delivery acknowledged it)", n)
	}
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Errorf("output holds %d events, want 0", n)
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want 1 (both deliveries' dead letters under one Nats-Msg-Id)", n)
	}
}

// TestUnstorableFirstDeliveryClaimsFirst: a first delivery whose event the output can never store claims the key
// before it dead-letters (and releases the claim with the dead letter): without the claim it cannot know that no
// later delivery of its envelope holds the claim, and its ack would remove the envelope under that delivery.
// Before: a first delivery dead-lettered and acknowledged without claiming.
func TestUnstorableFirstDeliveryClaimsFirst(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 2048, Duplicates: time.Minute})
	kv := w.Window
	e.start(e.config(w))
	big := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big-1"), make([]byte, 4096))
	e.drained(10 * time.Second)
	claimed := false
	for _, c := range w.claimsOf("big-1") {
		claimed = claimed || c.Claimant.Seq == big
	}
	if !claimed {
		t.Error("the first delivery of an unstorable event dead-lettered without claiming its key")
	}
	if _, found, err := kv.(*kvwindow.Window).Get(ctx(t), "t1", "gh", "big-1"); err != nil || found {
		t.Errorf("claim after the dead letter: found %v, err %v; want released", found, err)
	}
	// A well-formed copy is then published.
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big-1"), []byte("small"))
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Fatalf("output %d events, want the small copy", len(out))
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want 1", n)
	}
}
