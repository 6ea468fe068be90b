package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// heldPing is a window whose first Ping waits until the test lets it answer; every later one goes unanswered, as a
// bucket's server that is back but still recovering its streams leaves it.
type heldPing struct {
	pipeline.Window
	calls   int
	entered chan struct{}
	answer  chan struct{}
}

func (w *heldPing) Ping(ctx context.Context) error {
	w.calls++ // one poll at a time: the test runs them itself
	if w.calls == 1 {
		close(w.entered)
		<-w.answer
		return nil
	}
	return &kvwindow.BucketError{Bucket: "dedupe-window", Err: fmt.Errorf("ping bucket %q: %w", "dedupe-window", nats.ErrTimeout)}
}

// A window ping sent before a reconnect and answered says nothing of the window after it: the poll that reads it
// after the reconnect must not end the "recovering" the reconnect began, and the window not answering at the next
// poll is reported as recovering. Before, that answer cleared it and readiness said only "not answering" for the
// whole recovery (TestReadinessWindowRecovering failed so under -race: a poll whose ping was answered just before
// its server stopped waited on its other reads while the worker reconnected to another node).
func TestRecoveringKeptPastAPingSentBeforeTheReconnect(t *testing.T) {
	e := newEnv(t)
	w := &heldPing{Window: memWindow(), entered: make(chan struct{}), answer: make(chan struct{})}
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Standing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		pipeline.RefreshStatus(p, context.Background())
	}()
	<-w.entered // the ping is sent; the connection drops and comes back before its answer is read
	pipeline.LinkChanged(p, nats.RECONNECTING)
	pipeline.LinkChanged(p, nats.CONNECTED)
	close(w.answer)
	<-polled
	pipeline.RefreshStatus(p, context.Background())
	err = p.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "dedupe window recovering: bucket dedupe-window not answering yet") {
		t.Fatalf("readiness after the reconnect, the window not answering since: %v; want it recovering", err)
	}
}
