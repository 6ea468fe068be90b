package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestDuplicateWaitsForUndecidedHolder: a copy that passed the size check claims the key; the operator
// lowers the output's maximum message size; a well-formed copy of the same event arrives while the holder is
// undecided. It must be handed back, not acked as a duplicate: the holder is refused, dead-lettered and releases
// the claim, and the second copy is then published. Before: the second copy was acked as a duplicate and the
// output held 0 events.
func TestDuplicateWaitsForUndecidedHolder(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	cfg := e.config(w)
	e.start(cfg)
	big := strings.Repeat("b", 3000)
	var once sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "undecided" || out.Status != kvwindow.Won {
			return
		}
		once.Do(func() {
			st, err := e.js.Stream(context.Background(), pipeline.DefaultOutputStream)
			if err != nil {
				t.Error(err)
				return
			}
			sc := st.CachedInfo().Config
			sc.MaxMsgSize = 2048
			if _, err := e.js.UpdateStream(context.Background(), sc); err != nil {
				t.Errorf("update output stream: %v", err)
			}
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "undecided"), []byte("small"))
			// Hold the holder back until the copy has been decided one way or the other.
			natstest.Eventually(t, 10*time.Second, func() error {
				if e.metric("dedupeworker_envelopes_total", "outcome", "duplicate") > 0 ||
					e.metric("dedupeworker_naks_total", "reason", pipeline.NakHolderUndecided) > 0 {
					return nil
				}
				return errors.New("the second copy is not decided yet")
			})
		})
	})
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "undecided"), []byte(big))
	e.drained(20 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Fatalf("output holds %d events, want the small copy", len(out))
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want the oversized copy", n)
	}
}
