package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// answerLost is a replay window whose first Claim is stored but answered with err, as when the write lands and
// its answer does not arrive in time, or the client goes away while it is under way.
type answerLost struct {
	*kvwindow.Window
	err  error
	lost bool
}

func (a *answerLost) Claim(ctx context.Context, c kvwindow.Claim, k kvwindow.Known) (kvwindow.Outcome, error) {
	if a.lost {
		return a.Window.Claim(ctx, c, k)
	}
	a.lost = true
	if _, err := a.Window.Claim(context.WithoutCancel(ctx), c, k); err != nil {
		return kvwindow.Outcome{}, err
	}
	return kvwindow.Outcome{}, fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, a.err)
}

// A guarded delivery whose guard claim was stored but not confirmed is answered 503, and the provider retries it.
// Without an id the retry claims under a fingerprint of its own: the first claim, left in place, made it a
// replay (202, never published) and the delivery was lost. The receiver makes the claim again and releases it, so
// the retry is published — and a copy sent after that is still a replay. With an id the retry's fingerprint is
// the same and finds its own claim.
func TestReplayGuardClaimAnswerLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		id       string
		err      error
		goneAway bool // the client's request context ends with the claim
	}{
		{"without an id, timed out", "", context.DeadlineExceeded, false},
		{"without an id, client gone", "", context.Canceled, true},
		{"with an id, timed out", "d-7", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startJS(t, true)
			window, _ := openWindow(t, e, false)
			r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) {
				c.Window = &answerLost{Window: window, err: tc.err}
				c.PublishTimeout = 500 * time.Millisecond
			})
			body := `{"n":9}`
			h := hdr("X-Hub-Signature-256", githubSig(ghOld, body))
			if tc.id != "" {
				h.Set("X-GitHub-Delivery", tc.id)
			}
			req := httptest.NewRequest(http.MethodPost, "/hooks/acme/gh", strings.NewReader(body))
			req.Header = h.Clone()
			if tc.goneAway {
				ctx, cancel := context.WithCancel(req.Context())
				cancel()
				req = req.WithContext(ctx)
			}
			first := httptest.NewRecorder()
			r.ServeHTTP(first, req)
			if first.Code != http.StatusServiceUnavailable || e.lastSeq(t) != 0 {
				t.Fatalf("first: %d %s; INGEST holds %d", first.Code, first.Body.String(), e.lastSeq(t))
			}
			rec := do(r, http.MethodPost, "/hooks/acme/gh", h, body)
			if rec.Code != http.StatusAccepted || !strings.HasPrefix(rec.Body.String(), "accepted:") || e.lastSeq(t) != 1 {
				t.Fatalf("the provider's retry: %d %s; INGEST holds %d", rec.Code, rec.Body.String(), e.lastSeq(t))
			}
			replay := do(r, http.MethodPost, "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body), "X-GitHub-Delivery", "forged"), body)
			if replay.Code != http.StatusAccepted || !strings.Contains(replay.Body.String(), "not published") || e.lastSeq(t) != 1 {
				t.Fatalf("a copy under another id: %d %s; INGEST holds %d", replay.Code, replay.Body.String(), e.lastSeq(t))
			}
		})
	}
}

// After a failed claim of a delivery without an id, the claim made again is the delivery's own to release when
// it holds the key (Owned: the first write landed; Won: this one did), never when another delivery does.
func TestHeldByClaim(t *testing.T) {
	for _, tc := range []struct {
		status kvwindow.Status
		want   bool
	}{
		{kvwindow.Won, true},
		{kvwindow.Owned, true},
		{kvwindow.Duplicate, false},
		{kvwindow.Stale, false},
		{kvwindow.DeadLettered, false},
	} {
		if got := receiver.HeldByClaim(kvwindow.Outcome{Status: tc.status, Revision: 3}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.status, got, tc.want)
		}
	}
}
