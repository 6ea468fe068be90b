package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestCrashBetweenClaimAndAck replays what a worker that died mid-envelope leaves behind, with the real window:
// a claim made with the envelope's own claimant but nothing published, and a claim whose event was published but
// whose envelope was never acknowledged. Each redelivered envelope must end up in the output exactly once.
func TestCrashBetweenClaimAndAck(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfg := e.config(w)
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	claim := func(key string, seq uint64) uint64 { return e.claimedByDead(w, key, seq, kvwindow.Delivery{}) }
	// Crashed after the claim, before the publish.
	seq1 := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "c-1"), []byte("one"))
	stamp1 := e.stamp(seq1)
	claim("c-1", seq1)
	// Crashed after the publish, before the ack.
	seq2 := e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "c-2"), []byte("two"))
	id2 := "t1:gh:c-2#" + envelopeID(seq2, e.stamp(seq2))
	claim("c-2", seq2)
	pub := nats.NewMsg("deduped.t1.gh")
	pub.Header.Set("Nats-Msg-Id", id2)
	pub.Data = []byte("two")
	if _, err := e.js.PublishMsg(ctx(t), pub); err != nil {
		t.Fatal(err)
	}

	e.start(cfg)
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d messages, want 2 (one per event)", len(out))
	}
	ids := map[string]bool{}
	for _, m := range out {
		ids[header(t, m, "Nats-Msg-Id")] = true
	}
	if want := "t1:gh:c-1#" + envelopeID(seq1, stamp1); !ids[want] || !ids[id2] {
		t.Errorf("Nats-Msg-Ids %v, want %s and %s", ids, want, id2)
	}
	if n := e.metric("dedupeworker_envelopes_total", "outcome", "unique"); n != 2 {
		t.Errorf("unique = %v, want 2 (Owned claims are published)", n)
	}
}

// lostAnswer is a window whose first claim is made but answered with a failure.
type lostAnswer struct {
	pipeline.Window
	mu   sync.Mutex
	lost bool
}

func (w *lostAnswer) Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error) {
	out, err := w.Window.Claim(ctx, c, known)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && !w.lost {
		w.lost = true
		return kvwindow.Outcome{}, fmt.Errorf("%w: answer lost", kvwindow.ErrUnavailable)
	}
	return out, err
}

func TestClaimAnswerLost(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(&lostAnswer{Window: e.kvWindow()}))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "l-1"), []byte("x"))
	e.drained(10 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d messages, want 1", n)
	}
	if n := e.metric("dedupeworker_window_errors_total"); n != 1 {
		t.Errorf("window errors = %v, want 1", n)
	}
	if n := e.metric("dedupeworker_naks_total", "reason", pipeline.NakWindow); n != 1 {
		t.Errorf("naks{window-unavailable} = %v, want 1", n)
	}
}

func TestWindowUnavailable(t *testing.T) {
	e := newEnv(t)
	w := memWindow()
	cfg := e.config(w)
	cfg.MaxInFlight = 2
	// An operator-made consumer that lets only 2 envelopes out at a time, so that the rest stay pending (and
	// Provision must leave it as it is).
	e.keepingInput()
	if _, err := e.js.CreateConsumer(ctx(t), "INGEST", jetstream.ConsumerConfig{Durable: "dedupeworker",
		AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 2, AckWait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r := e.start(cfg)

	w.SetUnavailable(true)
	const n = 20
	for i := range n {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "w-"+strconv.Itoa(i)), []byte("x"))
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.metric("dedupeworker_window_errors_total"); got < 2 {
			return fmt.Errorf("%v window errors", got)
		}
		if got := e.metric("dedupeworker_consumer_pending"); got < n/2 {
			return fmt.Errorf("consumer_pending gauge %v", got)
		}
		if err := r.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "window unreachable") {
			return fmt.Errorf("Ready = %v, want window unreachable", err)
		}
		return nil
	})
	if got := e.count(pipeline.DefaultOutputStream); got != 0 {
		t.Fatalf("%d events forwarded while the window was down", got)
	}
	// The server counts a stored envelope as pending on the consumer only once its signal loop has run, after the
	// publish was acknowledged; and the worker sets the ready gauge just after the window error that Ready already
	// reports: poll both, while nothing may ever be acknowledged.
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 10*time.Second, func() error {
		var err error
		if info, err = e.consumerInfo(); err != nil {
			return err
		}
		if info.AckFloor.Stream != 0 {
			t.Fatalf("consumer: ack floor %d while the window is down; want nothing acknowledged", info.AckFloor.Stream)
		}
		if info.NumPending+uint64(info.NumAckPending) != n {
			return fmt.Errorf("consumer: %d pending + %d unacknowledged, want %d", info.NumPending, info.NumAckPending, n)
		}
		if e.metric("dedupeworker_ready") != 0 {
			return errors.New("ready gauge is 1 while the window is down")
		}
		return nil
	})

	if info.Config.MaxAckPending != 2 {
		t.Errorf("Provision changed the consumer: MaxAckPending %d", info.Config.MaxAckPending)
	}

	w.SetUnavailable(false)
	e.drained(15 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != n {
		t.Errorf("output holds %d messages, want %d", got, n)
	}
	// Ready again; an ack that a loaded machine left unconfirmed keeps it unready for the failures' quiet period
	// (10s), never longer.
	natstest.Eventually(t, 20*time.Second, func() error { return r.p.Ready(context.Background()) })
}

func TestForwardWhenWindowDown(t *testing.T) {
	e := newEnv(t)
	w := memWindow()
	cfg := e.config(w)
	cfg.ForwardWhenWindowDown = true
	e.start(cfg)
	w.SetUnavailable(true)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "f-1"), []byte("1"))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "f-1"), []byte("2"))
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d messages, want both copies", len(out))
	}
	for _, m := range out {
		if header(t, m, "Dedupe-Status") != "unkeyed" || header(t, m, "Dedupe-Reason") != "window-unavailable" ||
			header(t, m, "Dedupe-Key") != "f-1" || !strings.HasPrefix(header(t, m, "Idempotency-Key"), "msg/INGEST/") {
			t.Errorf("headers %v", m.Header)
		}
	}
}

func TestOutputStreamFull(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	// The operator's output stream: room for 3 messages, refusing more.
	e.operatorOutput(jetstream.StreamConfig{MaxMsgs: 3, Discard: jetstream.DiscardNew, Duplicates: time.Minute})
	e.start(cfg)
	const n = 5
	for i := range n {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "full-"+strconv.Itoa(i)), []byte("x"))
	}
	e.waitCount(pipeline.DefaultOutputStream, 3, 10*time.Second)
	// An event is stored before its envelope's ack reaches the server, and the refused envelopes' NAKs need not wait
	// for that ack: the three stored events' acks are polled for, not assumed once the output holds them.
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.metric("dedupeworker_naks_total", "reason", pipeline.NakPublish); got < 2 {
			return fmt.Errorf("%v publish NAKs", got)
		}
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if info.NumPending+uint64(info.NumAckPending) != n-3 {
			return fmt.Errorf("%d pending + %d unacknowledged, want %d held back", info.NumPending, info.NumAckPending, n-3)
		}
		return nil
	})
	keysSeen := map[string]bool{}
	for _, m := range e.messages(pipeline.DefaultOutputStream) {
		keysSeen[header(t, m, "Dedupe-Key")] = true
	}
	s, err := e.js.Stream(ctx(t), pipeline.DefaultOutputStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx(t)); err != nil {
		t.Fatal(err)
	}
	e.drained(15 * time.Second)
	for _, m := range e.messages(pipeline.DefaultOutputStream) {
		keysSeen[header(t, m, "Dedupe-Key")] = true
	}
	if len(keysSeen) != n {
		t.Errorf("events seen in the output: %v, want %d", keysSeen, n)
	}
	if got := e.count(pipeline.DefaultOutputStream); got != n-3 {
		t.Errorf("after the purge the output holds %d, want %d", got, n-3)
	}
}

func TestOutputRejectsForGood(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 1024, Duplicates: time.Minute})
	e.start(cfg)
	e.publish("ingest.t1.legacy", hdr("X-A", "b"), make([]byte, 2048))
	e.publish("ingest.t1.legacy", nil, []byte("small"))
	e.drained(10 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != 1 {
		t.Errorf("output holds %d, want the small event only", got)
	}
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	m := dl[0]
	if m.Subject != "dedupe.dlq.output-reject" || len(m.Data) != 2048 || header(t, m, "X-A") != "b" ||
		!strings.Contains(header(t, m, "Dedupe-Error"), "maximum message size of 1024") {
		t.Errorf("dead letter %s %v (%d bytes)", m.Subject, m.Header, len(m.Data))
	}
}

// TestReplicas runs two pipelines on the same durable consumer with the real window: copies of each event land on
// both, and every event comes out once.
func TestReplicas(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfgA, cfgB := e.config(w), e.config(w)
	cfgA.MaxInFlight, cfgB.MaxInFlight = 4, 4
	cfgB.Metrics = pipeline.NewMetrics(nil) // e.reg counts replica A only
	e.start(cfgA)
	e.start(cfgB)
	const events, copies = 100, 3
	e.preload(events*copies, func(j int) *nats.Msg {
		return &nats.Msg{Subject: "ingest.t1.gh", Header: hdr("X-GitHub-Delivery", "r-"+strconv.Itoa(j%events)),
			Data: []byte(strconv.Itoa(j / events))}
	})
	e.drained(20 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != events {
		t.Errorf("output holds %d, want %d", got, events)
	}
	gotA := e.metric("dedupeworker_envelopes_total")
	if gotA == 0 || gotA == events*copies {
		t.Errorf("replica A finished %v of %d envelopes: the copies were not split", gotA, events*copies)
	}
}

// TestGracefulShutdown cancels a pipeline mid-stream: nothing may be lost or doubled, and a second run finishes.
func TestGracefulShutdown(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	cfg := e.config(w)
	const n = 2000
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	e.preload(n, func(j int) *nats.Msg {
		return &nats.Msg{Subject: "ingest.t1.gh", Header: hdr("X-GitHub-Delivery", "s-"+strconv.Itoa(j))}
	})

	r := e.start(cfg)
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.count(pipeline.DefaultOutputStream); got < 100 {
			return fmt.Errorf("%d forwarded", got)
		}
		return nil
	})
	start := time.Now()
	r.stop(t)
	if d := time.Since(start); d > cfg.ShutdownTimeout+2*time.Second {
		t.Errorf("shutdown took %s", d)
	}
	if err := r.p.Ready(context.Background()); err == nil {
		t.Error("Ready after Run returned")
	}
	first := e.count(pipeline.DefaultOutputStream)
	info, err := e.consumerInfo()
	if err != nil {
		t.Fatal(err)
	}
	if acked := n - info.NumPending - uint64(info.NumAckPending); acked > first {
		t.Errorf("%d envelopes acknowledged but only %d events published", acked, first)
	}
	t.Logf("first run: %d of %d forwarded", first, n)

	e.start(cfg)
	e.drained(30 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	seen := map[string]int{}
	for _, m := range out {
		seen[header(t, m, "Dedupe-Key")]++
	}
	if len(out) != n || len(seen) != n {
		t.Errorf("output holds %d messages for %d distinct events, want %d each", len(out), len(seen), n)
	}
}

// TestServerRestart restarts the (file-backed) server under a running pipeline; it resumes by itself.
func TestServerRestart(t *testing.T) {
	e := newEnv(t)
	w := memWindow()
	r := e.start(e.config(w))
	for i := range 10 {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "a-"+strconv.Itoa(i)), nil)
	}
	e.waitCount(pipeline.DefaultOutputStream, 10, 10*time.Second)

	e.srv.Restart()
	natstest.Eventually(t, 20*time.Second, func() error { return r.p.Ready(context.Background()) })
	for i := range 10 {
		natstest.Eventually(t, 10*time.Second, func() error {
			_, err := e.js.PublishMsg(context.Background(), &nats.Msg{Subject: "ingest.t1.gh",
				Header: hdr("X-GitHub-Delivery", "b-"+strconv.Itoa(i))})
			return err
		})
	}
	e.waitCount(pipeline.DefaultOutputStream, 20, 30*time.Second)
	e.drained(10 * time.Second)
}

// invalidClaims is a window that rejects every claim as invalid.
type invalidClaims struct{ pipeline.Window }

func (invalidClaims) Claim(context.Context, kvwindow.Claim, kvwindow.Known) (kvwindow.Outcome, error) {
	return kvwindow.Outcome{}, fmt.Errorf("%w: key: too odd", kvwindow.ErrInvalid)
}

func TestInvalidClaimIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(invalidClaims{memWindow()}))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "odd"), []byte("x"))
	e.drained(10 * time.Second)
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != 1 || dl[0].Subject != "dedupe.dlq.bad-claim" || !strings.Contains(header(t, dl[0], "Dedupe-Error"), "too odd") {
		t.Fatalf("dead letters %v", dl)
	}
	if e.metric("dedupeworker_window_errors_total") != 0 {
		t.Error("an invalid claim counted as a window error")
	}
}

// TestDeadLetterStreamMissing: a dead letter that cannot be stored is handed back until it can.
func TestDeadLetterStreamMissing(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctx(t), pipeline.DefaultDLQStream); err != nil {
		t.Fatal(err)
	}
	cfg.Provision = false
	e.start(cfg)
	e.publish("ingest.bad@tenant.gh", nil, []byte("x"))
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.metric("dedupeworker_naks_total", "reason", pipeline.NakDeadLetter); got < 1 {
			return fmt.Errorf("%v dead-letter NAKs", got)
		}
		return nil
	})
	if info, err := e.consumerInfo(); err != nil || info.AckFloor.Stream != 0 {
		t.Fatalf("the envelope was acknowledged without its dead letter: %v %v", info, err)
	}
	e.createStream(jetstream.StreamConfig{Name: pipeline.DefaultDLQStream, Subjects: []string{"dedupe.dlq.>"}})
	e.drained(15 * time.Second)
	e.waitCount(pipeline.DefaultDLQStream, 1, time.Second)
}

// stuckWindow never answers until its context is cancelled.
type stuckWindow struct{ pipeline.Window }

func (stuckWindow) Claim(ctx context.Context, _ kvwindow.Claim, _ kvwindow.Known) (kvwindow.Outcome, error) {
	<-ctx.Done()
	return kvwindow.Outcome{}, fmt.Errorf("%w: %w", kvwindow.ErrUnavailable, ctx.Err())
}

// TestShutdownTimeout: envelopes that cannot finish within ShutdownTimeout are handed back, not acknowledged,
// and Run returns in bounded time.
func TestShutdownTimeout(t *testing.T) {
	e := newEnv(t)
	mem := memWindow()
	cfg := e.config(stuckWindow{mem})
	cfg.ShutdownTimeout = 300 * time.Millisecond
	r := e.start(cfg)
	for i := range 5 {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "stuck-"+strconv.Itoa(i)), nil)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.metric("dedupeworker_in_flight"); got != 5 {
			return fmt.Errorf("%v in flight", got)
		}
		return nil
	})
	start := time.Now()
	r.stop(t)
	// Well under the 10s Run waits for workers that ignore their cancellation: the 300ms ShutdownTimeout ended it
	// (a loaded machine may stretch the 300ms).
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("Run took %s to return", d)
	}
	if got := e.metric("dedupeworker_naks_total", "reason", pipeline.NakShutdown); got != 5 {
		t.Errorf("shutdown NAKs = %v, want 5", got)
	}
	if info, err := e.consumerInfo(); err != nil || info.AckFloor.Stream != 0 {
		t.Fatalf("acknowledged at shutdown: %+v %v", info, err)
	}
	cfg2 := e.config(mem)
	cfg2.Metrics = pipeline.NewMetrics(nil)
	e.start(cfg2)
	e.drained(10 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != 5 {
		t.Errorf("second run forwarded %d, want 5", got)
	}
}
