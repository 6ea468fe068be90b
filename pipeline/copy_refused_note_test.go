package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestCopyRefusedNoteLogged: a refused copy of a duplicate is a fact the protocol records in its plan
// (NoteCopyRefused, beside the duplicate's ack), and the worker warns because the plan says so, as it does for
// every other note: a protocol that notes a refusal is followed (here on every duplicate, no copy ever sent).
// Before, the worker warned on its own reading of the copy's publish and ignored the note.
func TestCopyRefusedNoteLogged(t *testing.T) {
	e := newEnv(t)
	noted := func(f protocol.Facts) protocol.Plan {
		p := protocol.Decide(f)
		if p.Do == protocol.Ack && p.Count == protocol.CountDuplicate {
			p.Note = protocol.NoteCopyRefused
		}
		return p
	}
	e.startWith(e.config(memWindow()), func(p *pipeline.Pipeline) { pipeline.SetDecide(p, noted) })
	for range 2 {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "noted"), []byte("x"))
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if e.metric("dedupeworker_envelopes_total", "outcome", pipeline.OutcomeDuplicate) < 1 {
			return errors.New("no duplicate acknowledged yet")
		}
		return nil
	})
	natstest.Eventually(t, 10*time.Second, func() error {
		if n := strings.Count(e.log.String(), "duplicate copy refused by the output stream"); n != 1 {
			return errors.New("the refusal the plan noted is not warned once")
		}
		return nil
	})
}
