package pipeline_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestDupWindowReach: a publish is collapsed with an earlier one only within the output's duplicate window, and
// never with one stored before the output stream was created (deleted and created again, it forgot every id).
func TestDupWindowReach(t *testing.T) {
	const pt = 10 * time.Second
	for _, tc := range []struct {
		name           string
		dup, age, want time.Duration
	}{
		{"window unknown", 0, time.Hour, 0},
		{"age unknown: the window", 2 * time.Minute, 0, 2 * time.Minute},
		{"stream older than its window: the window", 2 * time.Minute, time.Hour, 2 * time.Minute},
		{"stream created within its window: back to its creation", 2 * time.Minute, 30 * time.Second, 30*time.Second + pt + time.Second},
		{"stream created a moment ago", 2 * time.Minute, time.Millisecond, time.Millisecond + pt + time.Second},
		{"age plus timeout past the window: the window", 2 * time.Minute, 115 * time.Second, 2 * time.Minute},
	} {
		if got := pipeline.DupWindowReach(tc.dup, tc.age, pt); got != tc.want {
			t.Errorf("%s: dupWindowReach(%v, %v) = %v, want %v", tc.name, tc.dup, tc.age, got, tc.want)
		}
	}
}

// A takeover is published marked Dedupe-Possible-Duplicate for the output's creation exactly when its first claim
// was made no later than the creation (it may have stored the event in the stream deleted since), and for the
// window as before: protocol.Decide with the reach dupWindowReach gives it. A first claim made just after a fresh
// output's creation is not marked (it was, with a second of slack, on every fresh start).
func TestTakeoverMarkedForOutputCreation(t *testing.T) {
	const pt, dup = 10 * time.Second, 2 * time.Minute
	for _, tc := range []struct {
		name          string
		claimAge, age time.Duration // the first claim's and the output stream's, at one instant
		want          bool
	}{
		{"first claim before the output's creation", 5 * time.Second, 4 * time.Second, true},
		{"first claim at the output's creation", 4 * time.Second, 4 * time.Second, true},
		{"first claim just after the output's creation", 4*time.Second - time.Millisecond, 4 * time.Second, false},
		{"first claim well after the output's creation", time.Second, time.Hour, false},
		{"first claim older than the window", 2 * time.Minute, time.Hour, true},
		{"first claim within a second and the timeout of the window", dup - pt - time.Second, time.Hour, true},
		{"output's age not read yet", 5 * time.Second, 0, false},
	} {
		f := protocol.Facts{Kind: protocol.Keyed, Output: protocol.Output{Built: protocol.BuiltKeyed},
			Claim:  protocol.ClaimResult{Status: protocol.Owned, AgeKnown: true, FirstClaimAge: tc.claimAge},
			Config: protocol.Config{DupWindow: pipeline.DupWindowReach(dup, tc.age, pt), PublishTimeout: pt}}
		p := protocol.Decide(f)
		if p.Do != protocol.Publish {
			t.Fatalf("%s: Decide = %+v, want a publish", tc.name, p)
		}
		if got := p.Mark == protocol.PossibleDuplicate; got != tc.want {
			t.Errorf("%s: marked = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDupWindowShort: the output's duplicate window must cover the later of the two ack waits (the worker's and the
// consumer's, which the server redelivers after) plus the hold bound.
func TestDupWindowShort(t *testing.T) {
	const m = time.Minute
	for _, tc := range []struct {
		name                         string
		dup, ackWait, consumer, hold time.Duration
		want                         bool
	}{
		{"defaults", 2 * m, 30 * time.Second, 30 * time.Second, m, false},
		{"consumer not read yet", 2 * m, 30 * time.Second, 0, m, false},
		{"window short of the worker's ack wait", 2 * m, 90 * time.Second, 0, m, true},
		{"consumer's ack wait edited past the window", 2 * m, 30 * time.Second, 3 * m, m, true},
		{"consumer's ack wait edited shorter", 2 * m, 30 * time.Second, 5 * time.Second, m, false},
		{"exactly covered", 2 * m, m, 0, m, false},
	} {
		if got := pipeline.DupWindowShort(tc.dup, tc.ackWait, tc.consumer, tc.hold); got != tc.want {
			t.Errorf("%s: dupWindowShort = %v, want %v", tc.name, got, tc.want)
		}
	}
}
