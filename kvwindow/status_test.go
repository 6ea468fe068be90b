package kvwindow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestNotAnswering tells a server that does not answer (yet) from one that refuses, and from a connection that
// never sent the request; the bucket comes from the error as data (a *BucketError, as Ping's errors are), never
// from its text.
func TestNotAnswering(t *testing.T) {
	ping := func(bucket string, err error) error {
		return fmt.Errorf("readiness: %w", &kvwindow.BucketError{Bucket: bucket,
			Err: fmt.Errorf("%w: ping bucket %q: %w", kvwindow.ErrUnavailable, bucket, err)})
	}
	for _, tc := range []struct {
		name   string
		err    error
		bucket string
		ok     bool
	}{
		{"nil", nil, "", false},
		{"deadline", ping("dedupe-window", context.DeadlineExceeded), "dedupe-window", true},
		{"client timeout", ping("dedupe-window-02", nats.ErrTimeout), "dedupe-window-02", true},
		{"no responders", fmt.Errorf("claim: %w", nats.ErrNoResponders), "", true},
		{"jetstream not enabled", ping("w", jetstream.ErrJetStreamNotEnabled), "w", true},
		{"cluster unavailable", ping("w", &jetstream.APIError{Code: 503, ErrorCode: 10008,
			Description: "JetStream system temporarily unavailable"}), "w", true},
		{"stream offline", ping("w", &jetstream.APIError{Code: 500, ErrorCode: 10118,
			Description: "stream is offline"}), "w", true},
		{"stream not found", ping("w", jetstream.ErrStreamNotFound), "", false},
		{"bucket lost", kvwindow.ErrWindowLost, "", false},
		{"not sent while disconnected", ping("w", nats.ErrReconnectBufExceeded), "", false},
		{"other API error", ping("w", &jetstream.APIError{Code: 400, ErrorCode: 10003}), "", false},
		{"plain", errors.New("boom"), "", false},
		{"a bucket named in the text only", fmt.Errorf(`ping bucket "w": %w`, nats.ErrTimeout), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket, ok := kvwindow.NotAnswering(tc.err)
			if bucket != tc.bucket || ok != tc.ok {
				t.Errorf("NotAnswering(%v) = %q, %v; want %q, %v", tc.err, bucket, ok, tc.bucket, tc.ok)
			}
		})
	}
}
