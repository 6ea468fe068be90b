package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestPossibleDuplicateMarked: a publish lands, its ack is never confirmed (refused) and its record in
// the claim fails too (the window is unreachable at that moment), the fleet stops, and the redelivery comes after the output's duplicate window: the
// worker cannot know whether the event was stored, so it publishes, and marks, counts and logs the copy as a
// possible duplicate. Before: the second copy was stored unmarked and uncounted.
func TestPossibleDuplicateMarked(t *testing.T) {
	e := newAckDeniedEnv(t)
	e.shortDupWindow(time.Second)
	w := &hookWindow{Window: e.kvWindow()}
	w.markFails.Store(true)
	cfg := e.config(w)
	r := e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "maybe-twice"), []byte("x"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	// The ack is refused (never confirmed), so the worker tries to record the publish, and that fails too.
	natstest.Eventually(t, 10*time.Second, func() error {
		if w.marks.Load() < 1 {
			return errors.New("no record attempted")
		}
		return nil
	})
	r.stop(t)
	// The outage outlasts the output's 1s duplicate window: a republish would be stored again.
	e.waitDupWindowPassed(e.messages(pipeline.DefaultOutputStream)[0], 20*time.Second)

	w.markFails.Store(false)
	e2 := e.acksAllowed()
	w.Window = e2.kvWindow()
	e2.start(e2.config(w))
	e2.drained(20 * time.Second)
	out := e2.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d copies, want 2 (the second one marked)", len(out))
	}
	if got := header(t, out[1], contract.HeaderPossibleDuplicate); got != "true" {
		t.Errorf("second copy's %s = %q, want true", contract.HeaderPossibleDuplicate, got)
	}
	if got := header(t, out[0], contract.HeaderPossibleDuplicate); got != "" {
		t.Errorf("first copy marked %q", got)
	}
	if got := e2.metric("dedupeworker_possible_duplicates_total"); got != 1 {
		t.Errorf("possible_duplicates_total = %v, want 1", got)
	}
}

// TestDuplicateWindowEditedShorter: an operator shortens the output's duplicate window under a running
// worker; the worker reads it at run time and warns and counts when the ack wait and the hold bound no longer fit.
func TestDuplicateWindowEditedShorter(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.kvWindow())
	e.start(cfg)
	st, err := e.js.Stream(ctx(t), pipeline.DefaultOutputStream)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	sc.Duplicates = 2 * time.Second // ack wait is 5s
	if _, err := e.js.UpdateStream(ctx(t), sc); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if e.metric("dedupeworker_output_duplicate_window_short") != 1 {
			return errors.New("not flagged")
		}
		if strings.Count(e.log.String(), "duplicate window") == 0 {
			return errors.New("not logged")
		}
		return nil
	})
	if got := e.metric("dedupeworker_output_duplicate_window_seconds"); got != 2 {
		t.Errorf("duplicate window gauge %v, want 2", got)
	}
}
