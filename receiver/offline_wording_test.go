package receiver_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// With the server gone, a delivery is answered 503 and the log says the connection is down, not only what the
// client library failed with ("nats: outbound buffer limit exceeded": there is no reconnect buffer).
func TestServerDownIsLoggedAsSuch(t *testing.T) {
	e := startJS(t, true)
	r, logs := newReceiver(t, e, testPolicy(t))
	e.srv.Shutdown()
	natstest.Eventually(t, 10*time.Second, func() error {
		if e.nc.IsConnected() {
			return errors.New("still connected")
		}
		return nil
	})
	rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), `{"n":1}`)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logs.String(), `"err":"not connected to NATS (RECONNECTING): `) {
		t.Errorf("the log does not say the connection is down:\n%s", logs.String())
	}
}
