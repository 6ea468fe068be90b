package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// claimRefused is a replay window whose every Claim fails with err before writing anything, counting the calls.
type claimRefused struct {
	*kvwindow.Window
	err   error
	calls atomic.Int32
}

func (c *claimRefused) Claim(context.Context, kvwindow.Claim, kvwindow.Known) (kvwindow.Outcome, error) {
	c.calls.Add(1)
	return kvwindow.Outcome{}, c.err
}

// A claim of a delivery without an id that failed with an answer saying nothing was written (the bucket lost, no
// responders, a claim the bucket's age limit refuses, a closed window) is not made again: the delivery is
// answered 503 at once, its publish slot free for the next. Only a claim whose answer may have been lost is
// settled (TestReplayGuardClaimAnswerLost).
func TestReplayGuardClaimRefusedNotSettled(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"bucket lost", fmt.Errorf("%w: bucket \"replay\" was deleted under the running worker", kvwindow.ErrWindowLost)},
		{"no responders", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, nats.ErrNoResponders)},
		{"age limit", fmt.Errorf("%w: bucket \"replay\": its age limit (max_age 1h0m0s) is shorter than 24h0m0s", kvwindow.ErrUnavailable)},
		{"window closed", fmt.Errorf("%w: bucket \"replay\": the window was closed", kvwindow.ErrUnavailable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startJS(t, true)
			window, _ := openWindow(t, e, false)
			w := &claimRefused{Window: window, err: tc.err}
			r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) {
				c.Window = w
				c.PublishTimeout = 500 * time.Millisecond
			})
			body := `{"n":12}`
			rec := do(r, http.MethodPost, "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body)), body)
			if rec.Code != http.StatusServiceUnavailable || e.lastSeq(t) != 0 {
				t.Fatalf("%d %s; INGEST holds %d", rec.Code, rec.Body.String(), e.lastSeq(t))
			}
			if n := w.calls.Load(); n != 1 {
				t.Fatalf("the window was asked %d times, want once", n)
			}
		})
	}
}

// The claim of a delivery without an id is settled only when its answer may have been lost: no answer in time,
// or the client gone away while it was under way.
func TestClaimMayHaveLanded(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"timed out", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, context.DeadlineExceeded), true},
		{"nats timeout", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, nats.ErrTimeout), true},
		{"client gone", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, context.Canceled), true},
		{"bucket lost", fmt.Errorf("%w: bucket \"replay\" was deleted and created again", kvwindow.ErrWindowLost), false},
		{"bucket lost, on a timed-out write", fmt.Errorf("%w: %w", kvwindow.ErrWindowLost, context.DeadlineExceeded), false},
		{"no responders", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, nats.ErrNoResponders), false},
		{"no stream response", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable, jetstream.ErrNoStreamResponse), false},
		{"age limit", fmt.Errorf("%w: bucket \"replay\": its age limit is shorter", kvwindow.ErrUnavailable), false},
		{"window closed", fmt.Errorf("%w: bucket \"replay\": the window was closed", kvwindow.ErrUnavailable), false},
		{"invalid claim", kvwindow.ErrInvalid, false},
		{"refused by the server", fmt.Errorf("%w: claim: %w", kvwindow.ErrUnavailable,
			&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), false},
	} {
		if got := receiver.ClaimMayHaveLanded(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
