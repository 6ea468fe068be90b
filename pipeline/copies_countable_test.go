package pipeline_test

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestCountable: a copy is counted once its ack as a duplicate is confirmed, its holder known, and it was held
// neither through a pause nor longer than the hold bound or half the counter stream's duplicate window (so that
// two deliveries of one copy, both counted, fall inside that window and count once).
func TestCountable(t *testing.T) {
	const hold = 30 * time.Second
	in := protocol.Hold{Held: time.Second, Bound: time.Minute}
	for _, tc := range []struct {
		name   string
		count  protocol.Count
		ack    protocol.AckResult
		holder uint64
		h      protocol.Hold
		want   bool
	}{
		{"duplicate, ack confirmed", protocol.CountDuplicate, protocol.AckConfirmed, 7, in, true},
		{"ack unconfirmed: the redelivery counts", protocol.CountDuplicate, protocol.AckUnconfirmed, 7, in, false},
		{"not a duplicate", protocol.CountUnique, protocol.AckConfirmed, 7, in, false},
		{"holder unknown", protocol.CountDuplicate, protocol.AckConfirmed, 0, in, false},
		{"held through a pause", protocol.CountDuplicate, protocol.AckConfirmed, 7, protocol.Hold{Held: time.Second, Bound: time.Minute, Paused: true}, false},
		{"held exactly half the counter's window", protocol.CountDuplicate, protocol.AckConfirmed, 7, protocol.Hold{Held: hold, Bound: time.Minute}, true},
		{"held past half the counter's window", protocol.CountDuplicate, protocol.AckConfirmed, 7, protocol.Hold{Held: hold + 1, Bound: time.Minute}, false},
		{"held past the hold bound", protocol.CountDuplicate, protocol.AckConfirmed, 7, protocol.Hold{Held: 11 * time.Second, Bound: 10 * time.Second}, false},
	} {
		if got := pipeline.Countable(tc.count, tc.ack, tc.holder, tc.h, hold); got != tc.want {
			t.Errorf("%s: countable %v, want %v", tc.name, got, tc.want)
		}
	}
}
