package kvwindow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestProvisionCreateUnanswered: a bucket create that gets no answer in time (a cluster still forming, a server
// too busy; here a create the server drops) is unavailability, which the worker retries at its start, never a
// final error; a create JetStream refuses (here: over the account's stream limit) is final.
func TestProvisionCreateUnanswered(t *testing.T) {
	s := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		o.Users = []*server.User{{Username: "worker", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}}}
	}))
	js := jsFor(t, s.URL(), nats.UserInfo("worker", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	cfg := kvwindow.DefaultConfig()
	cfg.Timeout = 300 * time.Millisecond
	_, err := kvwindow.New(ctxT(t, 10*time.Second), js, cfg)
	if !errors.Is(err, kvwindow.ErrUnavailable) || errors.Is(err, kvwindow.ErrWindowLost) ||
		!strings.Contains(err.Error(), "may not publish to $JS.API.STREAM.CREATE.KV_dedupe-window") {
		t.Fatalf("unanswered create: %v, want ErrUnavailable naming the permission that would drop it", err)
	}

	// JetStream refuses a bucket larger than the server's storage: a configuration error, not unavailability.
	small := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.JetStreamMaxStore = 1 << 20 }))
	cfg = kvwindow.DefaultConfig()
	cfg.MaxBytes = 1 << 30
	_, err = kvwindow.New(ctxT(t, 10*time.Second), jsFor(t, small.URL()), cfg)
	if err == nil || errors.Is(err, kvwindow.ErrUnavailable) {
		t.Fatalf("refused create: %v, want a final error", err)
	}
	t.Logf("refused create: %v", err)
}
