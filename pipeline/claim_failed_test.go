package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestClaimFailed: what a claim's error tells the protocol. A lost bucket and an age limit too short for the claim
// are both ClaimLost (handed back until an operator acts, never forwarded unkeyed); only a window that could not
// decide is ClaimUnavailable; a stopping worker's claim is cancelled whatever the error says.
func TestClaimFailed(t *testing.T) {
	bucket := func(err error) error { return &kvwindow.BucketError{Bucket: "dedupe-window", Err: err} }
	for _, tc := range []struct {
		name      string
		cancelled bool
		err       error
		want      protocol.ClaimStatus
	}{
		{"stopping", true, bucket(kvwindow.ErrWindowLost), protocol.ClaimCancelled},
		{"invalid", false, fmt.Errorf("%w: key too long", kvwindow.ErrInvalid), protocol.ClaimInvalid},
		{"bucket lost", false, bucket(kvwindow.ErrWindowLost), protocol.ClaimLost},
		{"age limit", false, bucket(fmt.Errorf("%w: max_age 1h0m0s", kvwindow.ErrAgeLimit)), protocol.ClaimLost},
		{"bucket edited to discard old", false, bucket(fmt.Errorf("%w: discard old", kvwindow.ErrEvicting)), protocol.ClaimLost},
		{"timeout", false, fmt.Errorf("%w: %w", kvwindow.ErrUnavailable, context.DeadlineExceeded), protocol.ClaimUnavailable},
		{"other", false, errors.New("window down"), protocol.ClaimUnavailable},
	} {
		if got := pipeline.ClaimFailed(tc.cancelled, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
