package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// A failed provisioning attempt either stops the start or is retried with a reason of its own for readiness (the
// start stores each retried attempt's reason over the one before: TestProvisionWaitsForPlacement).
func TestProvisionFailureIsTheReason(t *testing.T) {
	placement := &jserr.PlacementError{What: "stream INGEST", Replicas: 3, Err: fmt.Errorf("create stream INGEST: %w",
		&jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers, Description: "no suitable peers for placement, peer offline"})}
	for _, tc := range []struct {
		name   string
		err    error
		stop   bool
		say    string // in the reason
		notSay string // not in the reason
	}{
		{"placement refused", placement, false, "cannot place stream INGEST with 3 replicas", ""},
		{"no answer in time", fmt.Errorf("create stream INGEST: %w", context.DeadlineExceeded), false,
			"provisioning failed, retrying: create stream INGEST: context deadline exceeded", "placement"},
		{"no responders", fmt.Errorf("stream INGEST: %w", nats.ErrNoResponders), false, "no responders", "placement"},
		{"cluster unavailable", &jetstream.APIError{Code: 503, ErrorCode: jserr.CodeClusterUnavailable,
			Description: "JetStream system temporarily unavailable"}, false, "temporarily unavailable", "placement"},
		{"refused for good", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, true, "", ""},
		{"incompatible stream", fmt.Errorf("stream INGEST: %w", pipeline.ErrIncompatible), true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, reason := pipeline.ProvisionFailed(tc.err)
			if stop != tc.stop {
				t.Fatalf("stop = %v, want %v", stop, tc.stop)
			}
			if stop {
				return
			}
			if reason == nil {
				t.Fatalf("retried with no reason for readiness")
			}
			if got := reason.Error(); !strings.Contains(got, tc.say) || (tc.notSay != "" && strings.Contains(got, tc.notSay)) {
				t.Errorf("reason = %q, want it to say %q and not %q", got, tc.say, tc.notSay)
			}
		})
	}
}
