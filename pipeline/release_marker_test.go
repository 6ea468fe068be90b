package pipeline_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestDeadLetteredEnvelopeNeverClaimsAgain: a delivery of an unstorable envelope claims, dead-letters, releases and
// acknowledges; a redelivery that arrived before that ack claims afterwards. It must find the envelope's own
// release marker (DeadLettered) and only acknowledge: holding the key again, it would be the holder of an envelope
// gone from the input, and a copy claiming meanwhile would take that for a finished holder and be dropped as its
// duplicate. Before: the redelivery won the free key (and dead-lettered and released it again).
func TestDeadLetteredEnvelopeNeverClaimsAgain(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 2048, Duplicates: time.Minute})
	cfg := e.config(w)
	cfg.AckWait = 2 * time.Second
	second := make(chan struct{})
	var once1, once2 sync.Once
	var redelivered atomic.Value // the redelivery's claim status
	w.mu.Lock()
	w.beforeClaim = func(c kvwindow.Claim) {
		if c.Key != "big" || c.Delivery.Count != 2 {
			return
		}
		once2.Do(func() {
			close(second)
			// The first delivery finishes (dead letter, release, ack) before the redelivery claims.
			natstest.Eventually(t, 20*time.Second, func() error {
				if e.metric("dedupeworker_envelopes_total", "outcome", "dead-letter") > 0 {
					return nil
				}
				return errors.New("the first delivery is not finished")
			})
		})
	}
	w.afterClaim = func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "big" {
			return
		}
		switch c.Delivery.Count {
		case 1:
			once1.Do(func() {
				// Held past the ack wait, so that the envelope is delivered again before this delivery acks.
				select {
				case <-second:
				case <-time.After(20 * time.Second):
					t.Error("no redelivery")
				}
			})
		case 2:
			redelivered.CompareAndSwap(nil, out.Status)
		}
	}
	w.mu.Unlock()
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big"), make([]byte, 4096))
	natstest.Eventually(t, 30*time.Second, func() error {
		if redelivered.Load() == nil {
			return errors.New("the redelivery has not claimed")
		}
		return nil
	})
	e.drained(20 * time.Second)
	if got := redelivered.Load(); got != kvwindow.DeadLettered {
		t.Errorf("the redelivery's claim: %v, want dead-lettered (it must not hold the key again)", got)
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want 1", n)
	}
	// A well-formed copy claims over the release marker and is published, unmarked.
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big"), []byte("small"))
	e.drained(20 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Fatalf("output %d events, want the small copy", len(out))
	}
	if got := header(t, out[0], contract.HeaderPossibleDuplicate); got != "" {
		t.Errorf("the copy's %s = %q, want none (the dead-lettered delivery held the claim from the start)", contract.HeaderPossibleDuplicate, got)
	}
}

// TestRefusedTakeoverMarksTheNextCopy: a delivery claims and stalls past the ack wait; the redelivery takes the
// claim over; the stalled delivery then stores the event and acknowledges (unrecorded: its ack was confirmed); the
// output's limits are lowered, so the redelivery is refused, dead-letters and releases. Releasing is right (had the
// stalled delivery never stored the event, keeping the claim would drop every copy), but the event may be stored:
// the release marker says so, and the copy that claims over it is published marked Dedupe-Possible-Duplicate.
// Before: the copy was published unmarked, a silent second copy.
func TestRefusedTakeoverMarksTheNextCopy(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	cfg := e.config(w)
	cfg.AckWait = 2 * time.Second
	takenOver := make(chan struct{})
	var once1, once2 sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "refused" {
			return
		}
		switch c.Delivery.Count {
		case 1:
			once1.Do(func() {
				select {
				case <-takenOver:
				case <-time.After(20 * time.Second):
					t.Error("no takeover")
				}
			})
		case 2:
			once2.Do(func() {
				if out.Status != kvwindow.Owned {
					t.Errorf("redelivery's claim: %v, want owned (a takeover)", out.Status)
				}
				close(takenOver)
				// The stalled delivery stores the event and acknowledges while the redelivery holds the claim.
				natstest.Eventually(t, 20*time.Second, func() error {
					if e.metric("dedupeworker_envelopes_total", "outcome", "unique") > 0 {
						return nil
					}
					return errors.New("the stalled delivery has not stored and acknowledged")
				})
				if err := e.lowerOutputLimit(2048); err != nil {
					t.Errorf("update output stream: %v", err)
				}
			})
		}
	})
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "refused"), []byte(strings.Repeat("b", 3000)))
	natstest.Eventually(t, 30*time.Second, func() error {
		if e.metric("dedupeworker_envelopes_total", "outcome", "unique") > 0 && e.count(pipeline.DefaultDLQStream) > 0 {
			return nil
		}
		return errors.New("not stored and dead-lettered yet")
	})
	e.drained(20 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Fatalf("output holds %d events, want 1 (the stalled delivery's)", n)
	}
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "refused"), []byte("small"))
	e.drained(20 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d events, want 2 (the stored event and the copy admitted after the release)", len(out))
	}
	if got := header(t, out[1], contract.HeaderPossibleDuplicate); got != "true" {
		t.Errorf("the copy's %s = %q, want true (the event may be stored already)", contract.HeaderPossibleDuplicate, got)
	}
	if got := e.metric("dedupeworker_possible_duplicates_total"); got != 1 {
		t.Errorf("possible_duplicates_total = %v, want 1", got)
	}
}
