package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// removedBefore makes r's removals meet the dead-letter stream as a second operator (another dlq replay, a dlq
// rm) or the stream's age limit leaves it: every dead letter r is about to remove was removed just before. answer
// is what r's own removal then gets; nil: the server's.
func removedBefore(t *testing.T, e *dlqEnv, r *dlqReader, answer func(ctx context.Context, seq uint64) error) {
	st, err := e.js.Stream(e.ctx, "DEDUPE_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	if answer == nil {
		answer = r.del
	}
	r.del = func(ctx context.Context, seq uint64) error {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			t.Errorf("the other removal of %d: %v", seq, err)
		}
		return answer(ctx, seq)
	}
}

// A dead letter replayed, then found removed meanwhile by someone else, is no failure: it is in INGEST and gone
// from DEDUPE_DLQ, as a replay leaves it. Before, the server's "no message found" (10057) made it "failed" and
// the replay exited 1.
func TestDlqReplayLetterRemovedMeanwhile(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")
	rp := newReplayer(t, e, e.js)
	removedBefore(t, e, rp.r, nil)
	var out, errb bytes.Buffer
	if err := rp.run(e.ctx, &out, &errb); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"seq 1: removed from DEDUPE_DLQ meanwhile (by another dlq replay or dlq rm, or the stream's limits)\n",
		"replayed 1 of the 1 selected dead letters of DEDUPE_DLQ to stream INGEST and removed it from DEDUPE_DLQ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("replay lacks %q:\n%s", want, out.String())
		}
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 0 {
		t.Errorf("after the replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
}

// dlq rm of a dead letter removed meanwhile says so and exits 0. Before: "failed", exit status 1.
func TestDlqRmLetterRemovedMeanwhile(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("two"), "")
	r, err := openDlqReader(e.ctx, e.js, "DEDUPE_DLQ", "dedupe.dlq", "ingest")
	if err != nil {
		t.Fatal(err)
	}
	removedBefore(t, e, r, nil)
	var out, errb bytes.Buffer
	o := dlqOptions{yes: true, all: true}
	if err := dlqRemove(e.ctx, r, o, time.Now(), &out, &errb); err != nil {
		t.Fatalf("rm: %v\n%s", err, out.String())
	}
	rows := tableRows(t, out.String())
	if len(rows) != 2 || rows[0][5] != "removed-meanwhile" || rows[1][5] != "removed-meanwhile" ||
		!strings.Contains(out.String(), "removed 2 of the 2 selected dead letters from DEDUPE_DLQ (2 of them removed meanwhile by another command or the stream's limits)") {
		t.Errorf("rm:\n%s", out.String())
	}
	if dlq := e.state("DEDUPE_DLQ"); dlq.Msgs != 0 {
		t.Errorf("after rm: DEDUPE_DLQ %+v", dlq)
	}
}

// A removal the server refused (nats.go's ErrMsgDeleteUnsuccessful, wrapping "no message found" and the like)
// removed nothing; an unanswered one may have.
func TestDlqRefusedRemoval(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w: nats: API error: code=500 err_code=10057 description=no message found", jetstream.ErrMsgDeleteUnsuccessful), true},
		{jetstream.ErrMsgNotFound, true},
		{context.DeadlineExceeded, false},
		{nats.ErrTimeout, false},
		{errors.New("nats: connection closed"), false},
	} {
		if got := dlqRefusedRemoval(tc.err); got != tc.want {
			t.Errorf("dlqRefusedRemoval(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A dead letter found gone after a failed removal was removed meanwhile by someone else only when the removal is
// known to have done nothing; after a failure this command cannot read (an unknown error), as after no answer, its
// own removal may have landed. Before, an unknown error was credited to someone else.
func TestDlqGoneAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want dlqRemoval
	}{
		{"refused", fmt.Errorf("%w: no message found", jetstream.ErrMsgDeleteUnsuccessful), dlqRemovedMeanwhile},
		{"not found", jetstream.ErrMsgNotFound, dlqRemovedMeanwhile},
		{"an API error", &jetstream.APIError{Code: 500, ErrorCode: 10057, Description: "no message found"}, dlqRemovedMeanwhile},
		{"no responders", nats.ErrNoResponders, dlqRemovedMeanwhile},
		{"no stream answered", jetstream.ErrNoStreamResponse, dlqRemovedMeanwhile},
		{"timeout", nats.ErrTimeout, dlqRemovedUnconfirmed},
		{"deadline", context.DeadlineExceeded, dlqRemovedUnconfirmed},
		{"connection closed", nats.ErrConnectionClosed, dlqRemovedUnconfirmed},
		{"unknown", errors.New("nats: something new"), dlqRemovedUnconfirmed},
	} {
		if got := dlqGoneAfter(tc.err); got != tc.want {
			t.Errorf("%s: dlqGoneAfter(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
