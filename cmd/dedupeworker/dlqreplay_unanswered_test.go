package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// inputGoneJS deletes the input stream right after the replay has read it, as an operator deleting it during a
// replay does: every publish after that has no stream to answer it.
type inputGoneJS struct {
	jetstream.JetStream
	t    *testing.T
	once sync.Once
}

func (j *inputGoneJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := j.JetStream.Stream(ctx, name)
	if name == "INGEST" && err == nil {
		j.once.Do(func() {
			if err := j.JetStream.DeleteStream(ctx, name); err != nil {
				j.t.Errorf("delete INGEST: %v", err)
			}
		})
	}
	return st, err
}

// A publish that no stream answers ("no responders": the input stream went away during the replay) is a publish
// without an answer, as one that timed out: after three in a row the replay stops and leaves the rest. Before,
// only a timeout counted, so the replay went on through every remaining dead letter (5 of 5 not replayed).
func TestDlqReplayStopsWhenNoStreamAnswers(t *testing.T) {
	srv := natstest.Run(t)
	e := newDlqEnv(t, srv.URL())
	for range 5 {
		e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("x"), "")
	}
	r, err := openDlqReader(e.ctx, e.js, "DEDUPE_DLQ", "dedupe.dlq", "ingest")
	if err != nil {
		t.Fatal(err)
	}
	rp := &dlqReplayer{js: &inputGoneJS{JetStream: e.js, t: t}, r: r, opts: dlqOptions{yes: true},
		inputStream: "INGEST", consumer: "dedupe-worker"}
	var out, errb bytes.Buffer
	err = rp.run(e.ctx, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "dlq replay: stopped after dead letter 3: 3 publishes in a row got no answer") {
		t.Fatalf("replay with the input stream gone: %v\n%s\n%s", err, out.String(), errb.String())
	}
	if dlq := e.state("DEDUPE_DLQ"); dlq.Msgs != 5 {
		t.Errorf("dead letters removed: %+v", dlq)
	}
}

// A dead letter whose subject the input stream does not capture is not published with --yes, as the dry run says:
// it fails naming the stream's subjects, and it is not taken for a publish without an answer (no stream answers a
// subject no stream captures), so three of them do not stop the replay. Before, each was published and failed
// with "no response from stream".
func TestDlqReplayUncapturedSubjectFailsWithoutPublishing(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())
	for range 3 {
		e.deadLetter("output-reject", "elsewhere.acme.gh", 0, "too large", nil, []byte("x"), "")
	}
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("y"), "")
	code, out, stderr := runCLI(t, "", "dlq", "replay", "--yes")
	if code != 1 || !strings.Contains(stderr, "dlq replay: 3 of 4 selected dead letters not replayed: seq 1 (failed), seq 2 (failed), seq 3 (failed)") {
		t.Fatalf("replay: %d\n%s\n%s", code, out, stderr)
	}
	for _, seq := range []string{"1", "2", "3"} {
		if want := "seq " + seq + ": stream INGEST does not capture subject elsewhere.acme.gh (its subjects: ingest.>)\n"; !strings.Contains(out, want) {
			t.Errorf("replay lacks %q:\n%s", want, out)
		}
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 3 {
		t.Errorf("after the replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
}
