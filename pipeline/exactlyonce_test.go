package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// These tests each pin one way an event could be lost or published twice under ordinary operations (leader
// changes, operator actions, hostile headers); each failed on the code before it.

// TestForgedVerificationCannotWin: Ingest-Verified is read from every value of every letter case of its name; a
// forged "true" beside the ingest service's "false" does not make the delivery claim the key.
func TestForgedVerificationCannotWin(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: memWindow()}
	e.start(e.config(w))
	cases := []struct {
		name string
		h    nats.Header
	}{
		{"false then true", nats.Header{"X-GitHub-Delivery": {"v-1"}, "Ingest-Verified": {"false", "true"}}},
		{"true then false", nats.Header{"X-GitHub-Delivery": {"v-2"}, "Ingest-Verified": {"true", "false"}}},
		{"forged spelling", nats.Header{"X-GitHub-Delivery": {"v-3"}, "Ingest-Verified": {"false"}, "ingest-verified": {"true"}}},
		{"forged spelling first", nats.Header{"X-GitHub-Delivery": {"v-4"}, "INGEST-VERIFIED": {"true"}, "Ingest-Verified": {"False"}}},
		{"anything but true", nats.Header{"X-GitHub-Delivery": {"v-5"}, "Ingest-Verified": {"yes"}}},
		{"empty value", nats.Header{"X-GitHub-Delivery": {"v-6"}, "Ingest-Verified": {""}}},
	}
	for _, c := range cases {
		e.publish("ingest.t1.gh", c.h, []byte(c.name))
	}
	e.publish("ingest.t1.gh", nats.Header{"X-GitHub-Delivery": {"v-ok"}, "Ingest-Verified": {"true", " TRUE "}}, []byte("verified"))
	e.drained(10 * time.Second)
	for i := range cases {
		if got := w.claimsOf(fmt.Sprintf("v-%d", i+1)); len(got) != 0 {
			t.Errorf("%s: the delivery claimed its key", cases[i].name)
		}
	}
	if got := w.claimsOf("v-ok"); len(got) != 1 {
		t.Errorf("a delivery verified in every value made %d claims, want 1", len(got))
	}
	if got := e.metric("dedupeworker_unkeyed_total", "source", "gh", "reason", string(pipeline.ReasonUnverified)); got != float64(len(cases)) {
		t.Errorf("unkeyed{unverified} = %v, want %d", got, len(cases))
	}
}

// TestIdempotencyKeysAreInjective: keys that NATS headers would make equal (trailing space, CR/LF) keep distinct
// Idempotency-Keys, and Dedupe-Key decodes back to the exact key.
func TestIdempotencyKeysAreInjective(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	e.start(e.config(w))
	ids := []string{"A", "A ", "A\r\nB", "A B", " A", "A%20", "A\tB", "A\x00"}
	for _, id := range ids {
		body, _ := json.Marshal(map[string]string{"id": id})
		e.publish("ingest.t1.orders", nil, body)
	}
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != len(ids) {
		t.Fatalf("output holds %d events, want %d (one per distinct key)", len(out), len(ids))
	}
	seen := map[string]bool{}
	for _, m := range out {
		ik := header(t, m, "Idempotency-Key")
		if seen[ik] {
			t.Errorf("Idempotency-Key %q appears twice", ik)
		}
		seen[ik] = true
		key, err := keys.ParseHeaderValue(header(t, m, "Dedupe-Key"))
		if err != nil {
			t.Errorf("Dedupe-Key %q: %v", header(t, m, "Dedupe-Key"), err)
			continue
		}
		tenant, source, k2, err := keys.ParseIdempotencyHeader(ik)
		if err != nil || tenant != "t1" || source != "orders" || k2 != key {
			t.Errorf("Idempotency-Key %q parses to %q %q %q (%v), want t1 orders %q", ik, tenant, source, k2, err, key)
		}
		if _, ok, err := w.Get(ctx(t), "t1", "orders", key); err != nil || !ok {
			t.Errorf("Dedupe-Key %q decodes to %q, which the window does not hold (%v)", header(t, m, "Dedupe-Key"), key, err)
		}
	}
}

// TestUnpublishableCopyGivesWay: a copy the output stream can never take is dead-lettered and releases the claim it
// made, so a well-formed copy of the same event arriving meanwhile is published, not dropped as a duplicate.
func TestUnpublishableCopyGivesWay(t *testing.T) {
	e := newEnv(t)
	w := &hookWindow{Window: e.kvWindow()}
	e.operatorOutput(jetstream.StreamConfig{MaxMsgSize: 2048, Duplicates: time.Minute})
	e.start(e.config(w))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big-1"), make([]byte, 4096))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "big-1"), []byte("small"))
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 || string(out[0].Data) != "small" {
		t.Fatalf("output %d events, want the small copy", len(out))
	}
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != 1 || dl[0].Subject != "dedupe.dlq.output-reject" || !strings.Contains(header(t, dl[0], "Dedupe-Error"), "maximum message size of 2048") {
		t.Fatalf("dead letters %v", dl)
	}
}

// TestLostAckPublishesUnderOneMsgID: the ack of a published event is lost (refused) and the source's TTL is
// shorter than the redelivery, so each redelivery claims anew; every redelivery of the envelope still publishes
// under the same Nats-Msg-Id, so the output keeps one copy. Refused acks are counted and make the pipeline unready.
func TestLostAckPublishesUnderOneMsgID(t *testing.T) {
	e := newAckDeniedEnv(t)
	cfg := e.config(e.kvWindow())
	cfg.AckWait = time.Second
	r := e.start(cfg)
	e.publish("ingest.t1.short", hdr("X-Event-Id", "lost-ack"), []byte("x"))
	natstest.Eventually(t, 20*time.Second, func() error {
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if info.NumRedelivered < 1 || e.metric("dedupeworker_envelopes_total", "outcome", "unique") < 3 {
			return fmt.Errorf("redelivered %d, published %v times", info.NumRedelivered, e.metric("dedupeworker_envelopes_total", "outcome", "unique"))
		}
		// The server refuses an ack only in an asynchronous -ERR; the worker counts it once the ack's answer is
		// overdue, in no order with the count of the envelope: poll it too.
		if got := e.metric("dedupeworker_ack_failures_total", "reason", pipeline.AckRefused); got < 1 {
			return fmt.Errorf("ack_failures{refused} = %v, want > 0", got)
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies of one envelope, want 1", n)
	}
	if err := r.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "acknowledgements failing") {
		t.Errorf("Ready = %v while every ack is refused", err)
	}
}

// TestRefusedAcksPastDuplicateWindow: every ack is refused for longer than the output's duplicate window; the
// envelope is redelivered again and again, yet published once: the redelivery that republished within the window
// records the publish in the claim, and later deliveries only try to ack.
func TestRefusedAcksPastDuplicateWindow(t *testing.T) {
	e := newAckDeniedEnv(t)
	e.shortDupWindow(2 * time.Second)
	cfg := e.config(e.kvWindow())
	cfg.AckWait = time.Second
	cfg.MaxHold = 10 * time.Second // the redeliveries themselves are quick; this test is about the window
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "refused"), []byte("x"))
	natstest.Eventually(t, 30*time.Second, func() error {
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if info.Delivered.Consumer < 7 { // 7 deliveries: well over twice the 2s duplicate window
			return fmt.Errorf("%d deliveries", info.Delivered.Consumer)
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies of one envelope after its acks were refused past the duplicate window, want 1", n)
	}
}

// TestRecreatedConsumerDoesNotRepublish: the worker creates the consumer again after an operator deleted it; what
// was processed is not delivered again, even once the output's duplicate window has passed.
func TestRecreatedConsumerDoesNotRepublish(t *testing.T) {
	e := newEnv(t)
	e.shortDupWindow(time.Second)
	cfg := e.config(e.kvWindow())
	r := e.start(cfg)
	for i := range 20 {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprint("rc-", i)), []byte("k"))
		e.publish("ingest.t1.legacy", nil, []byte("u"))
	}
	e.drained(10 * time.Second)
	r.stop(t)
	if got := e.count(pipeline.DefaultOutputStream); got != 40 {
		t.Fatalf("output holds %d, want 40", got)
	}
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	// The output's 1s duplicate window passes: a republish of what was processed would be stored again.
	out := e.messages(pipeline.DefaultOutputStream)
	e.waitDupWindowPassed(out[len(out)-1], 20*time.Second) // the newest: the server forgets ids in order
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "rc-new"), []byte("k"))
	e.drained(10 * time.Second)
	if got := e.count(pipeline.DefaultOutputStream); got != 41 {
		t.Fatalf("output holds %d after the consumer was created again, want 41 (40 + the new event)", got)
	}
}

// TestConsumerStartOnKeepingStream: on an input stream that keeps processed envelopes, a missing consumer is not
// created from the start of a non-empty stream without ConsumerStart.
func TestConsumerStartOnKeepingStream(t *testing.T) {
	e := newEnv(t)
	e.keepingInput()
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "old"), []byte("processed long ago"))
	cfg := e.config(memWindow())
	err := pipeline.Provision(ctx(t), e.js, cfg)
	if !errors.Is(err, pipeline.ErrConsumerStart) || !strings.Contains(err.Error(), "DEDUPE_CONSUMER_START") {
		t.Fatalf("Provision on a non-empty keeping stream = %v, want ErrConsumerStart naming DEDUPE_CONSUMER_START", err)
	}
	cfg.ConsumerStart = "seq:2"
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "new"), []byte("new"))
	e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	e.drained(10 * time.Second)
	if out := e.messages(pipeline.DefaultOutputStream); len(out) != 1 || string(out[0].Data) != "new" {
		t.Fatalf("output %v, want the new envelope only", out)
	}
}

// TestInputStreamRecreated: INGEST is deleted and created again under a running worker; sequences restart at 1,
// yet every new envelope is published and no two outputs share an id.
func TestInputStreamRecreated(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(e.kvWindow()))
	send := func(round string) {
		for i := range 5 {
			e.publish("ingest.t1.legacy", nil, []byte(round))
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprint(round, "-", i)), []byte(round))
		}
	}
	send("a")
	e.waitCount(pipeline.DefaultOutputStream, 10, 10*time.Second)
	if err := e.js.DeleteStream(ctx(t), pipeline.DefaultInputStream); err != nil {
		t.Fatal(err)
	}
	// The worker provisions the stream and its consumer again; an ingest service publishes as soon as it can.
	natstest.Eventually(t, 15*time.Second, func() error {
		_, err := e.js.Consumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer)
		return err
	})
	send("b")
	e.waitCount(pipeline.DefaultOutputStream, 20, 15*time.Second)
	e.drained(10 * time.Second)
	ids, msgIDs := map[string]bool{}, map[string]bool{}
	for _, m := range e.messages(pipeline.DefaultOutputStream) {
		ik, mid := header(t, m, "Idempotency-Key"), header(t, m, "Nats-Msg-Id")
		if ids[ik] || msgIDs[mid] {
			t.Errorf("id used twice: Idempotency-Key %q, Nats-Msg-Id %q", ik, mid)
		}
		ids[ik], msgIDs[mid] = true, true
	}
	if got := e.count(pipeline.DefaultOutputStream); got != 20 {
		t.Errorf("output holds %d, want 20", got)
	}
}

// TestStalledReplicaAfterClaim (a frozen replica, path a): a delivery claims, then its worker stalls past the ack
// wait; the redelivery takes the claim over and publishes. The stalled delivery must not publish again once the
// output's duplicate window has passed: it is held past the hold bound and handed back.
func TestStalledReplicaAfterClaim(t *testing.T) {
	testStalledReplica(t, false)
}

// TestStalledReplicaBeforeClaim (path b): a delivery stalls before it claims; its redelivery claims and
// publishes; the stalled one then finds a later delivery of its own envelope holding the claim (Stale) and does
// nothing.
func TestStalledReplicaBeforeClaim(t *testing.T) {
	testStalledReplica(t, true)
}

func testStalledReplica(t *testing.T, before bool) {
	e := newEnv(t)
	e.shortDupWindow(2 * time.Second) // hold bound: 1s
	w := &hookWindow{Window: e.kvWindow()}
	stall := func(c kvwindow.Claim) {
		if c.Delivery.Count == 1 && c.Key == "frozen" {
			time.Sleep(4 * time.Second) // the stall being simulated: a replica that stops before or after its claim
		}
	}
	if before {
		w.beforeClaim = stall
	} else {
		w.setAfterClaim(func(c kvwindow.Claim, _ kvwindow.Outcome) { stall(c) })
	}
	cfg := e.config(w)
	cfg.AckWait = time.Second
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "frozen"), []byte("x"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if n := len(w.claimsOf("frozen")); n < 2 {
			return fmt.Errorf("%d claims", n)
		}
		return nil
	})
	e.drained(20 * time.Second)
	// Let the stalled delivery finish what it does, well past the output's duplicate window.
	natstest.Eventually(t, 20*time.Second, func() error {
		if e.metric("dedupeworker_in_flight") != 0 {
			return errors.New("still in flight")
		}
		return nil
	})
	e.drained(20 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Errorf("output holds %d copies of one envelope, want 1", n)
	}
	if before {
		if got := e.metric("dedupeworker_stale_deliveries_total"); got < 1 {
			t.Errorf("stale deliveries = %v, want the stalled one", got)
		}
	} else if got := e.metric("dedupeworker_naks_total", "reason", pipeline.NakHeld); got < 1 {
		t.Errorf("naks{held-too-long} = %v, want the stalled delivery", got)
	}
}

// TestSubjectWithDelByteIsDeadLettered: a subject whose source is byte 0x7f is stored by the input stream; it
// must reach the dead-letter stream, not stay undelivered.
func TestSubjectWithDelByteIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(memWindow()))
	e.publish("ingest.acme.\x7f", nil, []byte("x"))
	e.publish("ingest.\x7f.gh", nil, []byte("y"))
	e.waitCount(pipeline.DefaultDLQStream, 2, 10*time.Second)
	e.drained(10 * time.Second)
	reasons := map[string]bool{}
	for _, m := range e.messages(pipeline.DefaultDLQStream) {
		reasons[m.Subject] = true
	}
	if !reasons["dedupe.dlq.bad-source"] || !reasons["dedupe.dlq.bad-tenant"] {
		t.Errorf("dead letters on %v, want bad-source and bad-tenant", reasons)
	}
}

// TestStreamLimitsAndSizes: what Provision creates has limits (work-queue input, age limits on the output and the
// dead letters), and the pipeline reports the three streams' sizes.
func TestStreamLimitsAndSizes(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(memWindow()))
	e.publish("ingest.t1.legacy", nil, []byte("hello"))
	e.drained(10 * time.Second)
	want := map[string]func(c jetstream.StreamConfig) error{
		pipeline.DefaultInputStream: func(c jetstream.StreamConfig) error {
			if c.Retention != jetstream.WorkQueuePolicy {
				return fmt.Errorf("retention %s, want work-queue", c.Retention)
			}
			return nil
		},
		pipeline.DefaultOutputStream: func(c jetstream.StreamConfig) error {
			if c.MaxAge != pipeline.DefaultOutputMaxAge {
				return fmt.Errorf("max age %s", c.MaxAge)
			}
			return nil
		},
		pipeline.DefaultDLQStream: func(c jetstream.StreamConfig) error {
			if c.MaxAge != pipeline.DefaultDLQMaxAge {
				return fmt.Errorf("max age %s", c.MaxAge)
			}
			return nil
		},
	}
	for name, check := range want {
		st, err := e.js.Stream(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(st.CachedInfo().Config); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		if got := e.metric("dedupeworker_stream_messages", "stream", pipeline.DefaultOutputStream); got != 1 {
			return fmt.Errorf("stream_messages{DEDUPED} = %v, want 1", got)
		}
		if got := e.metric("dedupeworker_stream_bytes", "stream", pipeline.DefaultOutputStream); got <= 5 {
			return fmt.Errorf("stream_bytes{DEDUPED} = %v", got)
		}
		if got := e.metric("dedupeworker_stream_messages", "stream", pipeline.DefaultInputStream); got != 0 {
			return fmt.Errorf("stream_messages{INGEST} = %v, want 0 (work queue)", got)
		}
		return nil
	})
}
