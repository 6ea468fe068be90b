package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// storedOriginal publishes an envelope to the input stream and returns its sequence and the Nats-Msg-Id the worker
// gives its dead letter (dlq/<stream>/<seq>/<stored at, ns>).
func (e *dlqEnv) storedOriginal(stream, subject string, hdr nats.Header, body []byte) (uint64, string) {
	e.t.Helper()
	m := nats.NewMsg(subject)
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Data = body
	ack, err := e.js.PublishMsg(e.ctx, m)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		e.t.Fatal(err)
	}
	stored, err := st.GetMsg(e.ctx, ack.Sequence)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence, fmt.Sprintf("dlq/%s/%d/%d", stream, ack.Sequence, stored.Time.UnixNano())
}

// deadLetterWithID is deadLetter with the Nats-Msg-Id the worker gives it (the original's identity).
func (e *dlqEnv) deadLetterWithID(reason, subject string, inputSeq uint64, id string, hdr nats.Header, body []byte) uint64 {
	e.t.Helper()
	h := nats.Header{}
	for k, v := range hdr {
		h[k] = v
	}
	seq := e.deadLetter(reason, subject, inputSeq, "why", h, body, "")
	// deadLetter stamps the id with the current time; store the same dead letter again under the real identity
	// and drop the first.
	st, err := e.js.Stream(e.ctx, "DEDUPE_DLQ")
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetMsg(e.ctx, seq)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.DeleteMsg(e.ctx, seq); err != nil {
		e.t.Fatal(err)
	}
	out := &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}
	out.Header.Set("Nats-Msg-Id", id)
	ack, err := e.js.PublishMsg(e.ctx, out)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func replayResults(t *testing.T, out string) map[uint64]dlqReplayRecord {
	t.Helper()
	got := map[uint64]dlqReplayRecord{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r dlqReplayRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		got[r.Seq] = r
	}
	return got
}

// Issue 15 item 5: a dead-lettered unkeyed envelope whose own ack was lost is still in the work-queue INGEST: the
// worker will deliver it again itself. Replaying its dead letter as well stored the event twice (before the fix:
// the replay was "replayed" as INGEST message 2 beside the original message 1; with the worker running, events
// msg/INGEST/1/… and msg/INGEST/2/…). Replay refuses it, in the dry run and with --yes (exit 1), whatever
// --force says; a dead letter whose input sequence now holds another envelope (a stream created again: same seq,
// another stored time) is replayed.
func TestDlqReplayRefusesWhileTheOriginalIsInTheInput(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())
	seq, id := e.storedOriginal("INGEST", "ingest.acme.wh", nil, []byte(`{"no":"key"}`))        // INGEST 1
	e.deadLetterWithID("output-reject", "ingest.acme.wh", seq, id, nil, []byte(`{"no":"key"}`)) // DLQ 2
	// The same input sequence, stored at another time: a stream created again reused the sequence.
	other := id[:strings.LastIndexByte(id, '/')+1] + "1"
	e.deadLetterWithID("output-reject", "ingest.acme.wh", seq, other, nil, []byte(`{"old":"one"}`)) // DLQ 4

	for _, args := range [][]string{{"dlq", "replay", "--json"}, {"dlq", "replay", "--json", "--force"}} {
		code, out, stderr := runCLI(t, "", args...)
		got := replayResults(t, out)
		if code != 0 || got[2].Result != dlqRefused || got[4].Result != dlqWouldReplay {
			t.Fatalf("%v: exit %d, results seq 2 %q, seq 4 %q; want refused and would-replay\n%s\n%s",
				args, code, got[2].Result, got[4].Result, out, stderr)
		}
		for _, want := range []string{"stream INGEST still holds the original as message 1",
			"the worker delivers it again itself: a replay would process the envelope twice"} {
			if !strings.Contains(got[2].Detail, want) {
				t.Errorf("%v: seq 2 detail %q lacks %q", args, got[2].Detail, want)
			}
		}
	}
	code, out, stderr := runCLI(t, "", "dlq", "replay", "--yes", "--seq", "2")
	if code != 1 || !strings.Contains(stderr, "dlq replay: 1 of 1 selected dead letters not replayed: seq 2 (refused)") {
		t.Errorf("replay --yes: exit %d\n%s\n%s", code, out, stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.LastSeq != 1 || dlq.Msgs != 2 {
		t.Fatalf("replay of a dead letter whose original is still in INGEST: INGEST last seq %d (want 1: nothing "+
			"published), DEDUPE_DLQ holds %d (want 2)", in.LastSeq, dlq.Msgs)
	}
	// Once the worker has acknowledged the original (the work-queue stream deletes it), the replay goes ahead.
	ingest, _ := e.js.Stream(e.ctx, "INGEST")
	if err := ingest.DeleteMsg(e.ctx, seq); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--seq", "2")
	if code != 0 || !strings.Contains(out, "replayed 1 of the 1 selected") {
		t.Errorf("replay once the original is gone: exit %d\n%s\n%s", code, out, stderr)
	}
}

// On an input stream that keeps processed envelopes (limits retention) the original is always there: what tells
// whether the worker will deliver it again is its consumer's ack floor.
func TestDlqReplayOnALimitsInputUsesTheAckFloor(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}},
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}},
	})
	js, ctx := e.js, e.ctx
	cons, err := js.CreateConsumer(ctx, "INGEST", jetstream.ConsumerConfig{Durable: "dedupeworker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	s1, id1 := e.storedOriginal("INGEST", "ingest.acme.wh", nil, []byte("one"))
	s2, id2 := e.storedOriginal("INGEST", "ingest.acme.wh", nil, []byte("two"))
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil { // envelope 1 processed; envelope 2 never delivered
			t.Fatal(err)
		}
	}
	e.deadLetterWithID("output-reject", "ingest.acme.wh", s1, id1, nil, []byte("one")) // DLQ 2
	e.deadLetterWithID("output-reject", "ingest.acme.wh", s2, id2, nil, []byte("two")) // DLQ 4
	code, out, stderr := runCLI(t, "", "dlq", "replay", "--json")
	got := replayResults(t, out)
	if code != 0 || got[2].Result != dlqWouldReplay || got[4].Result != dlqRefused ||
		!strings.Contains(got[4].Detail, "consumer dedupeworker has not acknowledged it (ack floor 1)") {
		t.Errorf("limits input: exit %d\n%s\n%s", code, out, stderr)
	}
}

// A dead letter that can only fail again is not replayed without --force: bad-subject, bad-tenant and bad-source
// (the worker refuses the subject itself) and control-header (an empty body with a Status header, which nats.go
// consumers take for a server status; replayed as it was, it is dead-lettered again). Before the fix each was
// "would-replay" and, with --yes, replayed.
func TestDlqReplayNeedsForceForWhatFailsAgain(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("bad-subject", "ingest.acme", 0, "no source token", nil, []byte("{}"), "")    // 1
	e.deadLetter("bad-tenant", "ingest.ac!me.gh", 0, "bad tenant", nil, []byte("{}"), "")      // 2
	e.deadLetter("bad-source", "ingest.acme.nope", 0, "unknown source", nil, []byte("{}"), "") // 3
	e.deadLetter("control-header", "ingest.acme.gh", 0, "Status header on an empty body",      // 4
		nats.Header{"Dedupe-Original-Status": {"409"}, "Dedupe-Original-Description": {"Consumer Deleted"}}, nil, "")
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("{}"), "") // 5

	code, out, stderr := runCLI(t, "", "dlq", "replay", "--json")
	got := replayResults(t, out)
	want := map[uint64]string{1: dlqRefused, 2: dlqRefused, 3: dlqRefused, 4: dlqRefused, 5: dlqWouldReplay}
	results := map[uint64]string{}
	for s, r := range got {
		results[s] = r.Result
	}
	if code != 0 || !reflect.DeepEqual(results, want) {
		t.Fatalf("dry run without --force: exit %d, results %v, want %v\n%s\n%s", code, results, want, out, stderr)
	}
	for s, frag := range map[uint64]string{
		2: "bad-tenant: the worker refuses its subject ingest.ac!me.gh, so a replay is dead-lettered again unless the worker now accepts it (a source or tenant rule changed); --force replays it anyway, or publish it to the right subject yourself (its body: dlq show 2 --body; its headers: dlq show 2) and remove it: dlq rm 2 --yes",
		4: "control-header: an empty body with a Status header (409 Consumer Deleted)",
	} {
		if !strings.Contains(got[s].Detail, frag) {
			t.Errorf("seq %d detail %q lacks %q", s, got[s].Detail, frag)
		}
	}
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--json", "--force")
	got = replayResults(t, out)
	for s := uint64(1); s <= 5; s++ {
		if got[s].Result != dlqWouldReplay {
			t.Errorf("--force: seq %d %q, want would-replay", s, got[s].Result)
		}
	}
	if !strings.Contains(got[4].Detail, "the worker dead-letters it again") {
		t.Errorf("--force: seq 4 detail %q does not say it fails again", got[4].Detail)
	}
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--force", "--seq", "4")
	if code != 0 {
		t.Fatalf("replay --force of control-header: exit %d\n%s\n%s", code, out, stderr)
	}
	// Replayed as it was: the original Status and Description headers are back, on the empty body.
	ingest, _ := e.js.Stream(e.ctx, "INGEST")
	m, err := ingest.GetMsg(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Status") != "409" || m.Header.Get("Description") != "Consumer Deleted" || len(m.Data) != 0 ||
		m.Header.Get("Dedupe-Original-Status") != "" {
		t.Errorf("replayed control-header envelope: %v %q", m.Header, m.Data)
	}
}

// Dead letters with an empty body and a raw Status header (written before the worker renamed those headers) are
// listed, shown and replayable like any other, even where the streams answer direct gets: a direct get answers
// with the stored headers as its own, and nats.go took "Status: 404" for "no message" (before the fix, ls of the
// four dead letters below listed 1: the scan stopped at the first of them) and other statuses for errors.
func TestDlqReadsDeadLettersWithAStatusHeader(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}, Retention: jetstream.WorkQueuePolicy, AllowDirect: true},
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}, AllowDirect: true},
	})
	e.deadLetter("output-reject", "ingest.acme.gh", 0, "too large", nil, []byte("{}"), "")                                                      // 1
	e.deadLetter("control-header", "ingest.acme.gh", 0, "status", nats.Header{"Status": {"404"}}, nil, "")                                      // 2
	e.deadLetter("control-header", "ingest.acme.gh", 0, "status", nats.Header{"Status": {"503"}}, nil, "")                                      // 3
	e.deadLetter("control-header", "ingest.acme.gh", 0, "status", nats.Header{"Status": {"409"}, "Description": {"Consumer Deleted"}}, nil, "") // 4
	code, out, stderr := runCLI(t, "", "dlq", "ls", "--json")
	var seqs []uint64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r dlqRecord
		if json.Unmarshal([]byte(l), &r) == nil {
			seqs = append(seqs, r.Seq)
		}
	}
	if code != 0 || !reflect.DeepEqual(seqs, []uint64{1, 2, 3, 4}) {
		t.Fatalf("ls: exit %d, listed %v, want [1 2 3 4]\n%s\n%s", code, seqs, out, stderr)
	}
	for _, seq := range []string{"2", "3", "4"} {
		code, out, stderr := runCLI(t, "", "dlq", "show", seq)
		if code != 0 || !strings.Contains(out, "  Status: ") || !strings.Contains(out, "body: 0 bytes") {
			t.Errorf("show %s: exit %d\n%s\n%s", seq, code, out, stderr)
		}
	}
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--force", "--seq", "3")
	if code != 0 || e.state("INGEST").Msgs != 1 {
		t.Errorf("replay of a raw Status dead letter: exit %d, INGEST %+v\n%s\n%s", code, e.state("INGEST"), out, stderr)
	}
}
