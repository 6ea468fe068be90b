package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// afterStoreJS stores every publish, then does what happens to a replay right after the input stream stored its
// envelope: the operator's Ctrl-C (cancel), or an answer that never came back in time (lost).
type afterStoreJS struct {
	jetstream.JetStream
	cancel context.CancelFunc // when set: cancel the replay's context once stored
	lost   bool               // the PubAck is lost: the publish reports a timeout
}

func (j *afterStoreJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(context.WithoutCancel(ctx), m, opts...)
	if err != nil {
		return ack, err
	}
	if j.cancel != nil {
		j.cancel()
	}
	if j.lost {
		return nil, context.DeadlineExceeded
	}
	return ack, nil
}

func newReplayer(t *testing.T, e *dlqEnv, js jetstream.JetStream) *dlqReplayer {
	t.Helper()
	r, err := openDlqReader(e.ctx, e.js, "DEDUPE_DLQ", "dedupe.dlq", "ingest")
	if err != nil {
		t.Fatal(err)
	}
	return &dlqReplayer{js: js, r: r, opts: dlqOptions{yes: true}, inputStream: "INGEST", consumer: "dedupe-worker",
		now: time.Now()}
}

// A replay interrupted (Ctrl-C) right after the input stream stored the envelope still removes its dead letter:
// the removal does not inherit the cancellation. Before, the removal failed at once, the row said "failed", the
// summary "replayed none … nothing was removed", and a rerun after INGEST's duplicate window stored it again.
func TestDlqReplayInterruptedAfterStoreRemoves(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("two"), "")

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	rp := newReplayer(t, e, &afterStoreJS{JetStream: e.js, cancel: cancel})
	var out, errb bytes.Buffer
	err := rp.run(ctx, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "dlq replay: interrupted after dead letter 1: context canceled") {
		t.Fatalf("interrupted replay: %v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "replayed 1 of the 1 selected dead letters of DEDUPE_DLQ to stream INGEST and removed it from DEDUPE_DLQ") {
		t.Errorf("interrupted replay, summary:\n%s", out.String())
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 1 || dlq.FirstSeq != 2 {
		t.Errorf("after the interrupted replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
}

// A publish whose answer never came (a timeout) may have been stored: it is reported unconfirmed, with how long a
// rerun is safe (INGEST's duplicate window, read from the stream), and the rerun stores it once. Before, it was
// "failed … still in DEDUPE_DLQ", as if nothing had been stored.
func TestDlqReplayUnansweredPublishIsUnconfirmed(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")

	rp := newReplayer(t, e, &afterStoreJS{JetStream: e.js, lost: true})
	var out, errb bytes.Buffer
	err := rp.run(e.ctx, &out, &errb)
	for _, want := range []string{
		"seq 1: no answer to the publish to ingest.acme.gh (expecting stream INGEST): context deadline exceeded: it may " +
			"be stored; run the replay again within 2m (INGEST's duplicate window) and it is not stored twice; still in DEDUPE_DLQ\n",
		"removed none of the 1 selected dead letters from DEDUPE_DLQ; 1 unconfirmed (may be stored: run the replay again within 2m, INGEST's duplicate window)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("unconfirmed replay lacks %q:\n%s", want, out.String())
		}
	}
	if err == nil || !strings.Contains(err.Error(), "seq 1 (unconfirmed)") {
		t.Errorf("unconfirmed replay: %v", err)
	}

	out.Reset()
	if err := newReplayer(t, e, e.js).run(e.ctx, &out, &errb); err != nil ||
		!strings.Contains(out.String(), "(1 already stored, by an earlier replay or from another dead letter of the same envelope)") {
		t.Fatalf("rerun: %v\n%s", err, out.String())
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 0 {
		t.Errorf("after the rerun: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
}

func TestDlqDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Minute: "2m", 90 * time.Second: "1m30s", time.Hour: "1h",
		90 * time.Minute: "1h30m", 45 * time.Second: "45s", 250 * time.Millisecond: "250ms"} {
		if got := dlqDuration(d); got != want {
			t.Errorf("dlqDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
