package jsapi_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
)

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		o    jetstream.JetStreamOptions
		want string
	}{
		{jetstream.JetStreamOptions{}, "$JS.API."},
		{jetstream.JetStreamOptions{Domain: "hub"}, "$JS.hub.API."},
		{jetstream.JetStreamOptions{APIPrefix: "$JS.x.API"}, "$JS.x.API."},
		{jetstream.JetStreamOptions{APIPrefix: "$JS.x.API."}, "$JS.x.API."},
	} {
		if got := jsapi.Prefix(tc.o); got != tc.want {
			t.Errorf("Prefix(%+v) = %q, want %q", tc.o, got, tc.want)
		}
	}
}
