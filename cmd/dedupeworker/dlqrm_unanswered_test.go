package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// unanswered is a removal's answer lost: with removedBefore, the letter is gone and this command cannot tell
// whether its own removal or another operator's took it.
func unanswered(context.Context, uint64) error { return nats.ErrTimeout }

// A removal that got no answer, of a dead letter then found gone, is not credited as this command's: the row says
// the letter is gone and the removal unconfirmed, and the command exits 0 (nothing is left to remove). Before, the
// row said "removed".
func TestDlqRmUnansweredRemovalOfLetterGone(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")
	r, err := openDlqReader(e.ctx, e.js, "DEDUPE_DLQ", "dedupe.dlq", "ingest")
	if err != nil {
		t.Fatal(err)
	}
	removedBefore(t, e, r, unanswered)
	var out, errb bytes.Buffer
	if err := dlqRemove(e.ctx, r, dlqOptions{yes: true, all: true}, time.Now(), &out, &errb); err != nil {
		t.Fatalf("rm: %v\n%s", err, out.String())
	}
	rows := tableRows(t, out.String())
	if len(rows) != 1 || rows[0][5] != "gone" ||
		!strings.Contains(out.String(), "removed 1 of the 1 selected dead letters from DEDUPE_DLQ (1 of them gone without an answer to the removal") {
		t.Errorf("rm:\n%s", out.String())
	}
	if dlq := e.state("DEDUPE_DLQ"); dlq.Msgs != 0 {
		t.Errorf("after rm: DEDUPE_DLQ %+v", dlq)
	}
}

// The same in a replay: the letter is replayed and gone, and the note says its removal went unanswered.
func TestDlqReplayUnansweredRemovalOfLetterGone(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("one"), "")
	rp := newReplayer(t, e, e.js)
	removedBefore(t, e, rp.r, unanswered)
	var out, errb bytes.Buffer
	if err := rp.run(e.ctx, &out, &errb); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	if want := "seq 1: removal from DEDUPE_DLQ unanswered; the letter is gone"; !strings.Contains(out.String(), want) {
		t.Errorf("replay lacks %q:\n%s", want, out.String())
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 0 {
		t.Errorf("after the replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
}
