package jserr_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// The cluster's "no suitable peers for placement" (10005) is told apart from the other refusals and from the
// answers that are not one, however it is wrapped; it is a 400, so Refused reports it too.
func TestNoPlacement(t *testing.T) {
	placement := &jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers,
		Description: "no suitable peers for placement: peers: 1 offline"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"placement refused", placement, true},
		{"placement refused, wrapped", fmt.Errorf("pipeline: create stream INGEST: %w", placement), true},
		{"stream name in use", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, false},
		{"cluster unavailable", &jetstream.APIError{Code: 503, ErrorCode: jserr.CodeClusterUnavailable}, false},
		{"no answer", context.DeadlineExceeded, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jserr.NoPlacement(tc.err); got != tc.want {
				t.Errorf("NoPlacement(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if !jserr.Refused(placement) {
		t.Errorf("Refused(%v) = false; a 400 is a refusal to whoever does not retry it", placement)
	}
}

// The warning names what cannot be placed, its replicas, the server's own text, both causes and the setting.
func TestPlacementErrorSaysBothCauses(t *testing.T) {
	err := fmt.Errorf("create: %w", &jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers,
		Description: "no suitable peers for placement: peers: 1 offline"})
	wrapped := &jserr.PlacementError{What: "stream INGEST", Replicas: 3, Err: err}
	if !jserr.NoPlacement(wrapped) {
		t.Errorf("NoPlacement(%v) = false, want the refusal it wraps", wrapped)
	}
	got := wrapped.Error()
	for _, want := range []string{"cannot place stream INGEST with 3 replicas (no suitable peers for placement: peers: 1 offline)",
		"a server may be offline or not yet known to the meta leader", "DEDUPE_REPLICAS is more than the servers available",
		"retrying"} {
		if !strings.Contains(got, want) {
			t.Errorf("PlacementError = %q, want it to say %q", got, want)
		}
	}
}
