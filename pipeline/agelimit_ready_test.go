package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestClaimLeavesAgeLimitStanding: a claim that succeeds clears a window error it disproves, never an age limit
// nor a lost bucket (one shard of several).
// With the window's longest TTL not known (Config.MaxTTL unset, as a library user may leave it), sources of
// several TTLs and an age limit between them, the claims of the short TTL succeed while the status poll's Ping
// reports the age limit: each success cleared it, and the worker was ready and unready by turns between polls.
// Only the poll's Ping clears it, once the limit is lifted. Before the fix the first claim made it ready.
func TestClaimLeavesAgeLimitStanding(t *testing.T) {
	e := newEnv(t)
	p, err := pipeline.Standing(e.config(memWindow()))
	if err != nil {
		t.Fatal(err)
	}
	aged := &kvwindow.BucketError{Bucket: "dedupe-window", Err: fmt.Errorf("%w: bucket %q: its age limit (max_age 2h0m0s) "+
		"is shorter than the TTL of a claim it refused, 72h0m0s", kvwindow.ErrAgeLimit, "dedupe-window")}
	for _, tc := range []struct {
		name  string
		err   error
		clear bool // whether a successful claim makes the pipeline ready again
	}{
		{"age limit", aged, false},
		// A sharded window with one bucket lost: the other shards' claims succeed, the lost shard's keys stay refused.
		{"one shard's bucket lost", &kvwindow.BucketError{Bucket: "dedupe-window-02", Err: fmt.Errorf("%w: bucket %q was deleted",
			kvwindow.ErrWindowLost, "dedupe-window-02")}, false},
		{"bucket not answering", fmt.Errorf("%w: ping bucket %q: timeout", kvwindow.ErrUnavailable, "dedupe-window"), true},
		{"other failure", errors.New("pipeline test: window down"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipeline.WindowDown(p, tc.err)
			for i := range 20 { // short-TTL claims between two status polls
				pipeline.ClaimSucceeded(p)
				if err := p.Ready(context.Background()); (err == nil) != tc.clear {
					t.Fatalf("claim %d after %v: ready %v, want ready %v", i, tc.err, err, tc.clear)
				}
			}
			pipeline.WindowUp(p) // the poll's Ping answers
			if err := p.Ready(context.Background()); err != nil {
				t.Fatalf("after the poll's Ping answered: %v", err)
			}
		})
	}
}
