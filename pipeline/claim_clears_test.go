package pipeline_test

import (
	"fmt"
	"testing"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A claim that succeeds clears a window that was not answering, but not a misconfiguration the status poll's ping
// reports (an age limit, a bucket discarding old claims) nor a lost bucket: other claims (short ones, or another
// shard's) succeed while it lasts, and readiness would flap between polls.
func TestClaimClears(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: timeout", kvwindow.ErrUnavailable), true},
		{fmt.Errorf("%w: bucket \"w\": max_age 1h", kvwindow.ErrAgeLimit), false},
		{fmt.Errorf("%w: bucket \"w\" was edited to discard old messages", kvwindow.ErrEvicting), false},
		{fmt.Errorf("%w: bucket \"w\" was deleted", kvwindow.ErrWindowLost), false},
	} {
		if got := pipeline.ClaimClears(tc.err); got != tc.want {
			t.Errorf("claimClears(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
