package pipeline_test

import (
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Where a missing consumer starts: DEDUPE_CONSUMER_START is used only when the worker starts, and only on a stream
// that keeps processed envelopes.
func TestConsumerStartDecision(t *testing.T) {
	for _, c := range []struct {
		set, workQueue, empty, recreate bool
		want                            string
	}{
		{false, true, false, false, "first"},
		{false, true, true, true, "first"},
		{true, true, false, false, "first, setting ignored"}, // "new" or "seq:" would skip unprocessed envelopes
		{true, true, false, true, "first, setting ignored"},
		{true, true, true, false, "first, setting ignored"},
		{false, false, true, false, "first"}, // nothing processed is kept
		{false, false, true, true, "first"},
		{false, false, false, false, "needs setting"},
		{false, false, false, true, "needs setting"},
		{true, false, false, false, "as set"},
		{true, false, true, false, "as set"},
		{true, false, false, true, "needs restart"}, // a setting left from an earlier start would replay
		{true, false, true, true, "first"},
	} {
		if got := pipeline.StartDecision(c.set, c.workQueue, c.empty, c.recreate); got != c.want {
			t.Errorf("set %v, work-queue %v, empty %v, re-created under the running worker %v: %q, want %q",
				c.set, c.workQueue, c.empty, c.recreate, got, c.want)
		}
	}
}
