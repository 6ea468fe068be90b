package kvwindow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func jsFor(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(natstest.Connect(t, url, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// newWindow is New, retried while the window is unavailable (a cluster that has just formed may leave a request
// unanswered for a moment), as the worker retries it at its start, and while a cluster just formed refuses to place
// a replicated bucket (jserr.NoPlacement: only peers the meta leader has had statistics from since their route last
// came up are placed on, and under -race on a loaded machine a route comes up again).
func newWindow(t testing.TB, js jetstream.JetStream, cfg kvwindow.Config) *kvwindow.Window {
	t.Helper()
	var w *kvwindow.Window
	natstest.Eventually(t, 30*time.Second, func() error {
		var err error
		w, err = kvwindow.New(ctxT(t, 30*time.Second), js, cfg)
		if err != nil && !jserr.NoPlacement(err) &&
			(!errors.Is(err, kvwindow.ErrUnavailable) || errors.Is(err, kvwindow.ErrWindowLost)) {
			t.Fatalf("New: %v", err)
		}
		return err
	})
	return w
}

// envelope is the claimant stored at seq in an input stream (a fixed, realistic stamp per sequence).
func envelope(seq uint64) kvwindow.Claimant {
	return kvwindow.Claimant{Seq: seq, Stamp: 1_700_000_000_000_000_000 + int64(seq)*1000}
}

// delivery is the n-th delivery by one consumer.
func delivery(n uint64) kvwindow.Delivery {
	return kvwindow.Delivery{Consumer: 1_700_000_500_000_000_000, Count: n}
}

func claim(t testing.TB, w *kvwindow.Window, c kvwindow.Claim) kvwindow.Outcome {
	t.Helper()
	out, err := w.Claim(ctxT(t, 10*time.Second), c, kvwindow.Known{})
	if err != nil {
		t.Fatalf("claim %+v: %v", c, err)
	}
	return out
}

// decision is what an outcome decided: its status and revision (the fields the older tests compare), without the
// holder's details.
func decision(o kvwindow.Outcome) kvwindow.Outcome {
	return kvwindow.Outcome{Status: o.Status, Revision: o.Revision}
}

// editStream edits the stream name as an operator would (nats stream edit): edit changes its configuration as it
// stands.
func editStream(t testing.TB, js jetstream.JetStream, name string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	edit(&sc)
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
}
