package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestFailureSupersededByLaterAnswer: a publish or an ack that fails only after a later request was answered
// (it waited out its timeout across a leader change while the ones sent after it went through) says nothing
// about the output or the consumer now. Marking the pipeline unready for it left a worker that had just drained
// everything unready for 10 s with nothing left to clear it (the fault suite's output step-downs, long variant).
// A failure of a request sent after the last answer still makes the pipeline unready.
func TestFailureSupersededByLaterAnswer(t *testing.T) {
	e := newEnv(t)
	timeout := errors.New("pipeline test: no answer in time")
	for _, tc := range []struct {
		name        string
		fail        func(*pipeline.Pipeline, error, time.Duration)
		answer      func(*pipeline.Pipeline)
		unreadyText string
	}{
		{"publish", pipeline.PublishFailed, pipeline.PublishStored, "publishes to"},
		{"ack", pipeline.AckFailed, pipeline.AckConfirmed, "acknowledgements failing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pipeline.Standing(e.config(memWindow()))
			if err != nil {
				t.Fatal(err)
			}
			sent := pipeline.Clock(p)
			tc.answer(p) // a request sent after this one was answered meanwhile
			tc.fail(p, timeout, sent)
			if err := p.Ready(context.Background()); err != nil {
				t.Fatalf("unready for a failure a later answer superseded: %v", err)
			}
			tc.fail(p, timeout, pipeline.Clock(p)+1) // sent after the last answer
			err = p.Ready(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.unreadyText) {
				t.Fatalf("Ready after a failure sent after the last answer: %v, want an error saying %q", err, tc.unreadyText)
			}
		})
	}
}
