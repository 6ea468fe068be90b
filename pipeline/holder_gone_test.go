package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestCopyRereadsClaimOfHolderGoneFromInput: a copy finds the key claimed by a holder that has not published yet;
// before the copy looks the holder up, the holder is refused by the output (its limits lowered), dead-lettered,
// releases the claim and is acknowledged. The copy then finds the holder gone from the input: it must read the
// key again and, finding the claim released, be handed back and published — not acknowledged as a duplicate.
// Before: the copy was acknowledged as a duplicate (output 0 events, 1 dead letter).
func TestCopyRereadsClaimOfHolderGoneFromInput(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	cfg := e.config(w)
	copyClaimed := make(chan struct{})
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "holder-gone" {
			return
		}
		switch {
		case c.Claimant.Seq == 1 && out.Status == kvwindow.Won:
			if err := e.lowerOutputLimit(2048); err != nil {
				t.Errorf("update output stream: %v", err)
			}
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "holder-gone"), []byte("small"))
			select { // the holder stays undecided until the copy has read its claim
			case <-copyClaimed:
			case <-time.After(10 * time.Second):
				t.Error("the copy did not claim")
			}
		case c.Claimant.Seq == 2 && out.Status == kvwindow.Duplicate && !out.Published:
			select {
			case <-copyClaimed:
				return // a later delivery of the copy
			default:
			}
			close(copyClaimed)
			// The copy looks its holder up only once the holder is dead-lettered and acknowledged.
			natstest.Eventually(t, 10*time.Second, func() error {
				if e.metric("dedupeworker_envelopes_total", "outcome", "dead-letter") > 0 {
					return nil
				}
				return errors.New("the holder is not dead-lettered yet")
			})
		}
	})
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "holder-gone"), []byte(strings.Repeat("b", 3000)))
	e.drained(20 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Errorf("output holds %d events, want the small copy", len(out))
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want the oversized copy", n)
	}
}
