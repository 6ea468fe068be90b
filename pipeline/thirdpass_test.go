package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// These tests pin the third review of exactly-once (issue "exactly once, third pass"); each failed on the code
// before its fix, with the figure in its comment.

// hookWindow wraps a window with hooks the tests use to place an operator's action or a failure at an exact step.
type hookWindow struct {
	pipeline.Window
	mu sync.Mutex
	// afterClaim runs after the real claim returned, before the pipeline sees the outcome.
	afterClaim func(c kvwindow.Claim, out kvwindow.Outcome)
	// markFails makes MarkPublished fail as an unreachable window would, while it is set.
	markFails atomic.Bool
	marks     atomic.Int64
}

func (w *hookWindow) Claim(ctx context.Context, c kvwindow.Claim) (kvwindow.Outcome, error) {
	out, err := w.Window.Claim(ctx, c)
	w.mu.Lock()
	hook := w.afterClaim
	w.mu.Unlock()
	if hook != nil && err == nil {
		hook(c, out)
	}
	return out, err
}

func (w *hookWindow) setAfterClaim(f func(c kvwindow.Claim, out kvwindow.Outcome)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.afterClaim = f
}

func (w *hookWindow) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64) (uint64, bool, error) {
	w.marks.Add(1)
	if w.markFails.Load() {
		return 0, false, fmt.Errorf("%w: test: mark refused", kvwindow.ErrUnavailable)
	}
	return w.Window.MarkPublished(ctx, c, rev)
}

// ackDeniedConn is a connection to srv (started with ackDeniedUsers) whose acknowledgements the server refuses.
func ackDeniedUsers(o *server.Options) {
	o.Users = []*server.User{
		{Username: "noack", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}},
		{Username: "ok", Password: "pw"},
	}
}

// TestLostFirstAckPastDuplicateWindow (item 1): the delivery that published first loses its ack, and the fleet is
// down for longer than the output's duplicate window; the redelivery must find the publish recorded in the claim
// and only ack. Before: the first publish was never recorded (MarkPublished only for redeliveries), so the
// redelivery took the live claim over and stored the event again — output held 2 copies.
func TestLostFirstAckPastDuplicateWindow(t *testing.T) {
	// Work-queue input (the default): the unconfirmed ack makes the worker record the publish. An input stream that
	// keeps acknowledged envelopes: every keyed publish is recorded before the ack.
	for _, keeps := range []bool{false, true} {
		t.Run(fmt.Sprintf("input keeps envelopes=%v", keeps), func(t *testing.T) { testLostFirstAck(t, keeps) })
	}
}

func testLostFirstAck(t *testing.T, keeps bool) {
	srv := natstest.Run(t, natstest.WithOptions(ackDeniedUsers))
	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("noack", "pw"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, srv, nc, js)
	e.shortDupWindow(time.Second)
	if keeps {
		if _, err := e.js.CreateStream(ctx(t), jetstream.StreamConfig{Name: pipeline.DefaultInputStream, Subjects: []string{"ingest.>"}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config(e.kvWindow())
	r := e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "first-ack-lost"), []byte("x"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	r.stop(t) // the fleet goes down before the ack wait (5s) redelivers the envelope
	// The outage outlasts the output's 1s duplicate window (the scenario being tested; no condition to poll).
	time.Sleep(1500 * time.Millisecond)

	nc2 := natstest.Connect(t, srv.URL(), nats.UserInfo("ok", "pw"))
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEnvOn(t, srv, nc2, js2)
	cfg2 := e2.config(e2.kvWindow())
	e2.start(cfg2)
	e2.drained(20 * time.Second)
	if n := e2.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies after the first ack was lost past the duplicate window, want 1", n)
	}
}

// TestAckToDeletedConsumerCounted (item 1): an operator deletes the consumer between the publish and the ack; the
// ack vanishes. It must be counted as an ack failure, and the re-created consumer's delivery must not store the
// event again. Before: no failure was counted (ack_failures 0).
func TestAckToDeletedConsumerCounted(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	var once sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "deleted-consumer" {
			return
		}
		once.Do(func() {
			if err := e.js.DeleteConsumer(context.Background(), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
				t.Errorf("delete consumer: %v", err)
			}
		})
	})
	cfg := e.config(w)
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "deleted-consumer"), []byte("x"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if got := e.metric("dedupeworker_ack_failures_total"); got < 1 {
			return fmt.Errorf("ack failures %v", got)
		}
		return nil
	})
	e.drained(20 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies, want 1", n)
	}
}

// TestDuplicateWaitsForUndecidedHolder (item 2): a copy that passed the size check claims the key; the operator
// lowers the output's maximum message size; a well-formed copy of the same event arrives while the holder is
// undecided. It must be handed back, not acked as a duplicate: the holder is refused, dead-lettered and releases
// the claim, and the second copy is then published. Before: the second copy was acked as a duplicate and the
// output held 0 events.
func TestDuplicateWaitsForUndecidedHolder(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	cfg := e.config(w)
	e.start(cfg)
	big := strings.Repeat("b", 3000)
	var once sync.Once
	w.setAfterClaim(func(c kvwindow.Claim, out kvwindow.Outcome) {
		if c.Key != "undecided" || out.Status != kvwindow.Won {
			return
		}
		once.Do(func() {
			st, err := e.js.Stream(context.Background(), pipeline.DefaultOutputStream)
			if err != nil {
				t.Error(err)
				return
			}
			sc := st.CachedInfo().Config
			sc.MaxMsgSize = 2048
			if _, err := e.js.UpdateStream(context.Background(), sc); err != nil {
				t.Errorf("update output stream: %v", err)
			}
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "undecided"), []byte("small"))
			// Hold the holder back until the copy has been decided one way or the other.
			natstest.Eventually(t, 10*time.Second, func() error {
				if e.metric("dedupeworker_envelopes_total", "outcome", "duplicate") > 0 ||
					e.metric("dedupeworker_naks_total", "reason", pipeline.NakHolderUndecided) > 0 {
					return nil
				}
				return errors.New("the second copy is not decided yet")
			})
		})
	})
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "undecided"), []byte(big))
	e.drained(20 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Fatalf("output holds %d events, want the small copy", len(out))
	}
	if n := e.count(pipeline.DefaultDLQStream); n != 1 {
		t.Errorf("dead letters %d, want the oversized copy", n)
	}
}

// TestControlHeaderEnvelopes (item 6): envelopes with an empty body and a Status header, which nats.go's consumer
// takes for server status messages, flood the input beside genuine deliveries. Every genuine delivery is processed
// and every such envelope is dead-lettered with a readable reason. Before: 0 of 5 genuine deliveries processed in
// 15s; the control-shaped envelopes were never handled.
func TestControlHeaderEnvelopes(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.kvWindow())
	e.start(cfg)
	shapes := []nats.Header{
		{"Status": {"409"}, "Description": {"Consumer Deleted"}},
		{"Status": {"400"}, "Description": {"Bad Request"}},
		{"Status": {"100"}, "Description": {"Idle Heartbeat"}},
		{"Status": {"408"}, "Description": {"Request Timeout"}},
		{"Status": {"409"}, "Description": {"Leadership Change"}},
		{"Status": {"404"}},
	}
	const poison, genuine = 60, 5
	for i := range poison {
		h := nats.Header{}
		for k, v := range shapes[i%len(shapes)] {
			h[k] = v
		}
		h.Set("X-GitHub-Delivery", fmt.Sprint("poison-", i))
		e.publish("ingest.t1.gh", h, nil)
	}
	for i := range genuine {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprint("genuine-", i)), []byte("ok"))
	}
	natstest.Eventually(t, 15*time.Second, func() error {
		if n, _ := e.tryCount(pipeline.DefaultOutputStream); n != genuine {
			return fmt.Errorf("%d of %d genuine deliveries processed", n, genuine)
		}
		return nil
	})
	e.drained(20 * time.Second)
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != poison {
		t.Fatalf("dead letters %d, want %d", len(dl), poison)
	}
	for _, m := range dl {
		if m.Subject != "dedupe.dlq."+pipeline.DeadControlHeader {
			t.Fatalf("dead letter on %s", m.Subject)
		}
		if !strings.Contains(header(t, m, "Dedupe-Error"), "Status") {
			t.Errorf("dead letter reason %q does not name the Status header", header(t, m, "Dedupe-Error"))
		}
		// The dead letter itself must not look like a status message to a nats.go consumer of the DLQ stream.
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			t.Errorf("dead letter keeps the Status header with an empty body: %v", m.Header)
		}
	}
}

// TestPossibleDuplicateMarked (item 8): a publish lands, its ack is never confirmed (refused) and its record in
// the claim fails too (the window is unreachable at that moment), the fleet stops, and the redelivery comes after the output's duplicate window: the
// worker cannot know whether the event was stored, so it publishes, and marks, counts and logs the copy as a
// possible duplicate. Before: the second copy was stored unmarked and uncounted.
func TestPossibleDuplicateMarked(t *testing.T) {
	srv := natstest.Run(t, natstest.WithOptions(ackDeniedUsers))
	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("noack", "pw"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, srv, nc, js)
	e.shortDupWindow(time.Second)
	w := &hookWindow{Window: e.kvWindow()}
	w.markFails.Store(true)
	cfg := e.config(w)
	r := e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "maybe-twice"), []byte("x"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	// The ack is refused (never confirmed), so the worker tries to record the publish, and that fails too.
	natstest.Eventually(t, 10*time.Second, func() error {
		if w.marks.Load() < 1 {
			return errors.New("no record attempted")
		}
		return nil
	})
	r.stop(t)
	time.Sleep(1500 * time.Millisecond) // the outage outlasts the 1s duplicate window: the scenario itself

	nc2 := natstest.Connect(t, srv.URL(), nats.UserInfo("ok", "pw"))
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	w.markFails.Store(false)
	e2 := newEnvOn(t, srv, nc2, js2)
	w.Window = e2.kvWindow()
	e2.start(e2.config(w))
	e2.drained(20 * time.Second)
	out := e2.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d copies, want 2 (the second one marked)", len(out))
	}
	if got := header(t, out[1], pipeline.HeaderPossibleDuplicate); got != "true" {
		t.Errorf("second copy's %s = %q, want true", pipeline.HeaderPossibleDuplicate, got)
	}
	if got := header(t, out[0], pipeline.HeaderPossibleDuplicate); got != "" {
		t.Errorf("first copy marked %q", got)
	}
	if got := e2.metric("dedupeworker_possible_duplicates_total"); got != 1 {
		t.Errorf("possible_duplicates_total = %v, want 1", got)
	}
}

// TestDuplicateWindowEditedShorter (item 1): an operator shortens the output's duplicate window under a running
// worker; the worker reads it at run time and warns and counts when the ack wait and the hold bound no longer fit.
func TestDuplicateWindowEditedShorter(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.kvWindow())
	e.start(cfg)
	st, err := e.js.Stream(ctx(t), pipeline.DefaultOutputStream)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	sc.Duplicates = 2 * time.Second // ack wait is 5s
	if _, err := e.js.UpdateStream(ctx(t), sc); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if e.metric("dedupeworker_output_duplicate_window_short") != 1 {
			return errors.New("not flagged")
		}
		if strings.Count(e.log.String(), "duplicate window") == 0 {
			return errors.New("not logged")
		}
		return nil
	})
	if got := e.metric("dedupeworker_output_duplicate_window_seconds"); got != 2 {
		t.Errorf("duplicate window gauge %v, want 2", got)
	}
}
