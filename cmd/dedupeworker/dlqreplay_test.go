package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// The replay's effects, read back from the streams: what the input stream stored (headers and body), what stays
// in the dead-letter stream, and a replay interrupted between publish and removal (here: a user who may not
// remove dead letters) run again, which stores each envelope once.
func TestDlqReplayStoresOnceAndRemoves(t *testing.T) {
	// A request the server refuses (a permissions violation) is never answered: wait less for it than a person would.
	defer func(d time.Duration) { dlqRequestTimeout = d }(dlqRequestTimeout)
	dlqRequestTimeout = 500 * time.Millisecond
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		all := &server.SubjectPermission{Allow: []string{">"}}
		o.Users = []*server.User{
			{Username: "admin", Password: "pw", Permissions: &server.Permissions{Publish: all, Subscribe: all}},
			{Username: "nodelete", Password: "pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.MSG.DELETE.>"}},
				Subscribe: all,
			}},
			{Username: "noingest", Password: "pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"ingest.>"}},
				Subscribe: all,
			}},
		}
	}))
	url := func(user string) string { return fmt.Sprintf("nats://%s:pw@127.0.0.1:%d", user, srv.Opts.Port) }
	t.Setenv("DEDUPE_NATS_URL", url("admin"))
	e := newDlqEnv(t, srv.URL(), nats.UserInfo("admin", "pw"))

	orig := nats.Header{"X-GitHub-Delivery": {"d1"}, "Stripe-Signature": {"t=1,v1=a", "t=1,v1=b"}, "Idempotency-Key": {"sender"}}
	e.deadLetter("output-reject", "ingest.acme.gh", 3, "too large", orig, []byte("one"), "") // 1
	e.deadLetter("bad-tenant", "ingest.ac!me.gh", 4, "bad tenant", nil, []byte("two"), "")   // 2
	e.deadLetter("output-reject", "ingest.acme.gh", 40, "too large", nil, []byte("thr"),     // 3
		"sender headers (9 bytes) dropped; body 3 of 90000 bytes kept; the original is message 40 of stream INGEST")
	e.deadLetter("output-reject", "elsewhere.acme.gh", 5, "too large", nil, []byte("four"), "") // 4

	// The dry run says what would happen and changes nothing.
	code, out, stderr := runCLI(t, "", "dlq", "replay")
	if code != 0 {
		t.Fatalf("dry run: %d %s %s", code, out, stderr)
	}
	results := map[string]string{}
	for _, r := range tableRows(t, out) {
		results[r[0]] = r[5]
	}
	if want := map[string]string{"1": dlqWouldReplay, "2": dlqRefused, "3": dlqRefused, "4": dlqWouldFail}; !reflect.DeepEqual(results, want) {
		t.Errorf("dry run results %v, want %v\n%s", results, want, out)
	}
	for _, want := range []string{
		"seq 3: truncated: sender headers (9 bytes) dropped; body 3 of 90000 bytes kept; the original is message 40 of stream INGEST. A replay would publish what was kept, not the original envelope; stream INGEST no longer holds the original, its message 40 (a work-queue stream deletes an envelope once the worker acknowledged it); --truncated-ok replays what was kept\n",
		"seq 2: bad-tenant: the worker refuses its subject ingest.ac!me.gh, so a replay is dead-lettered again unless the worker now accepts it (a source or tenant rule changed); --force replays it anyway, or publish it to the right subject yourself (its body: dlq show 2 --body; its headers: dlq show 2) and remove it: dlq rm 2 --yes\n",
		"seq 4: stream INGEST does not capture subject elsewhere.acme.gh (its subjects: ingest.>)\n",
		"dry run: would replay 1 of the 4 selected dead letters of DEDUPE_DLQ to stream INGEST; 2 refused; 1 would-fail. Nothing was changed: add --yes to replay\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.LastSeq != 0 || dlq.Msgs != 4 {
		t.Fatalf("the dry run changed something: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}

	// A user who may not publish on the input subjects gets no answer: replay stops after a few, removing nothing.
	e.deadLetter("output-reject", "ingest.acme.gh", 6, "too large", nil, []byte("five"), "") // 5
	t.Setenv("DEDUPE_NATS_URL", url("noingest"))
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--force", "--seq", "1-2,5")
	if code != 1 || !strings.Contains(stderr, "dlq replay: stopped after dead letter 5: 3 publishes in a row got no answer (may this user publish on the input subjects? is stream INGEST available?)") {
		t.Fatalf("replay without publish permission: %d\n%s\n%s", code, out, stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.LastSeq != 0 || dlq.Msgs != 5 {
		t.Fatalf("after the unanswered replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}
	if dlq, err := e.js.Stream(e.ctx, "DEDUPE_DLQ"); err != nil {
		t.Fatal(err)
	} else if err := dlq.DeleteMsg(e.ctx, 5); err != nil {
		t.Fatal(err)
	}

	// Stored, but not removed: reported, exit status 1, and the way out is dlq rm (a replay after INGEST's
	// duplicate window would store it again).
	t.Setenv("DEDUPE_NATS_URL", url("nodelete"))
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--seq", "1")
	if code != 1 || !strings.Contains(stderr, "dlq replay: 1 of 1 selected dead letters not replayed: seq 1 (not-removed)") ||
		!strings.Contains(out, "seq 1: stored as message 1 of INGEST but not removed from DEDUPE_DLQ") ||
		!strings.Contains(out, "remove it with dedupeworker dlq rm --seq 1 --yes, not with another replay (after INGEST's duplicate window of 2m a replay stores it again)") ||
		!strings.Contains(out, "removed none of the 1 selected dead letters from DEDUPE_DLQ; 1 not-removed (stored in INGEST: remove with dedupeworker dlq rm --seq 1 --yes, not with another replay)") {
		t.Fatalf("replay without delete permission: %d\n%s\n%s", code, out, stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 1 || dlq.Msgs != 4 {
		t.Fatalf("after the interrupted replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}

	// Run again within INGEST's duplicate window: the input stream collapses the second publish; the dead letter goes.
	t.Setenv("DEDUPE_NATS_URL", url("admin"))
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--force", "--seq", "1-2", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("replay again: %d\n%s\n%s", code, out, stderr)
	}
	var recs []dlqReplayRecord
	for _, l := range lines {
		var r dlqReplayRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if recs[0].Seq != 1 || recs[0].Result != dlqAlreadyStored || recs[0].IngestSeq != 1 ||
		recs[1].Seq != 2 || recs[1].Result != dlqReplayed || recs[1].IngestSeq != 2 {
		t.Errorf("replay again: %+v", recs)
	}
	if !strings.Contains(stderr, "replayed 2 of the 2 selected dead letters of DEDUPE_DLQ to stream INGEST and removed them from DEDUPE_DLQ (1 already stored, by an earlier replay or from another dead letter of the same envelope)") {
		t.Errorf("replay again, summary: %s", stderr)
	}
	if in, dlq := e.state("INGEST"), e.state("DEDUPE_DLQ"); in.Msgs != 2 || dlq.Msgs != 2 {
		t.Fatalf("after the second replay: INGEST %+v, DEDUPE_DLQ %+v", in, dlq)
	}

	// What the input stream stored: the original headers, no Dedupe-* ones, the body as it was.
	ingest, _ := e.js.Stream(e.ctx, "INGEST")
	m, err := ingest.GetMsg(e.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Its Nats-Msg-Id is the dead letter's own (the envelope's identity: dlq/INGEST/<input seq>/<stored at>).
	id := m.Header.Get("Nats-Msg-Id")
	m.Header.Del("Nats-Msg-Id")
	wantHdr := nats.Header{"X-GitHub-Delivery": {"d1"}, "Stripe-Signature": {"t=1,v1=a", "t=1,v1=b"}, "Idempotency-Key": {"sender"},
		"Nats-Expected-Stream": {"INGEST"}}
	if m.Subject != "ingest.acme.gh" || string(m.Data) != "one" || !reflect.DeepEqual(m.Header, wantHdr) ||
		!strings.HasPrefix(id, "replay/dlq/INGEST/3/") {
		t.Errorf("INGEST message 1: %s %q %v, Nats-Msg-Id %q\nwant headers %v, Nats-Msg-Id replay/dlq/INGEST/3/<stored at>/<content tag>",
			m.Subject, m.Data, m.Header, id, wantHdr)
	}

	// Refused and failed ones are named, and stay.
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes")
	if code != 1 || !strings.Contains(stderr, "dlq replay: 2 of 2 selected dead letters not replayed: seq 3 (refused), seq 4 (failed)") ||
		!strings.Contains(out, "seq 4: stream INGEST does not capture subject elsewhere.acme.gh (its subjects: ingest.>)\n") {
		t.Fatalf("replay the rest: %d\n%s\n%s", code, out, stderr)
	}
	if dlq := e.state("DEDUPE_DLQ"); dlq.Msgs != 2 {
		t.Fatalf("refused and failed dead letters were removed: %+v", dlq)
	}
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes", "--seq", "3", "--truncated-ok")
	if code != 0 || !strings.Contains(out, "replayed 1 of the 1 selected") {
		t.Fatalf("replay --truncated-ok: %d\n%s\n%s", code, out, stderr)
	}
	m, err = ingest.GetMsg(e.ctx, 3)
	if err != nil || string(m.Data) != "thr" || m.Header.Get("Dedupe-Truncated") != "" {
		t.Fatalf("INGEST message 3: %v %v", m, err)
	}
	code, out, _ = runCLI(t, "", "dlq", "ls")
	if got := rowSeqs(tableRows(t, out)); code != 0 || !reflect.DeepEqual(got, []string{"4"}) {
		t.Errorf("left in the dead-letter stream: %v\n%s", got, out)
	}
}

// End to end, as an operator meets it: the output stream is misconfigured (a maximum message size too small), so
// large events are dead-lettered as output-reject while the worker runs; the stream is fixed; dlq replay brings
// them back through the running worker, where dedupe still applies.
func TestDlqReplayEndToEnd(t *testing.T) {
	srv := natstest.Run(t)
	base := workerEnv(t, srv, "sources: {gh: {dedupe: github}}")
	// The misconfiguration: DEDUPED takes nothing over 1 KiB.
	e := newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{{Name: "DEDUPED", Subjects: []string{"deduped.>"},
		MaxMsgSize: 1024, Duplicates: 2 * time.Minute}})
	_, stop := startWorker(t)
	waitHTTP(t, base+"/readyz", http.StatusOK)

	big := func(n int) []byte { return []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, n, strings.Repeat("p", 2000))) }
	publish := func(subject, delivery string, body []byte) {
		t.Helper()
		m := nats.NewMsg(subject)
		if delivery != "" {
			m.Header.Set("X-GitHub-Delivery", delivery)
		}
		m.Data = body
		if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	publish("ingest.acme.gh", "big-1", big(1))
	publish("ingest.acme.gh", "small-1", []byte(`{"n":0}`))
	publish("ingest.acme.gh", "big-2", big(2))
	publish("ingest.acme.gh", "big-1", big(1)) // the provider's retry of big-1
	publish("ingest.ac!me.gh", "bad-1", []byte("{}"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if n := e.state("DEDUPE_DLQ").Msgs; n != 4 {
			return fmt.Errorf("DEDUPE_DLQ holds %d dead letters, want 4", n)
		}
		return nil
	})

	code, out, stderr := runCLI(t, "", "dlq", "ls")
	if code != 0 || !strings.Contains(out, "DEDUPE_DLQ holds 4 dead letters: bad-tenant 1, output-reject 3\n") {
		t.Fatalf("ls: %d\n%s\n%s", code, out, stderr)
	}
	rows := tableRows(t, out)
	var reasons []string
	for _, r := range rows {
		reasons = append(reasons, r[2]+" "+r[3])
	}
	slices.Sort(reasons) // the worker dead-letters concurrently: in any order
	if want := []string{"bad-tenant ingest.ac!me.gh", "output-reject ingest.acme.gh", "output-reject ingest.acme.gh",
		"output-reject ingest.acme.gh"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("ls rows %v, want %v\n%s", reasons, want, out)
	}
	if !strings.Contains(out, "over stream DEDUPED's maximum message size of 1024") {
		t.Errorf("ls does not say why:\n%s", out)
	}

	// The fix. The worker reads DEDUPED's limits with its stream gauges: once the gauge counts an event published
	// after the fix, the worker knows the new limit.
	info, err := e.js.Stream(e.ctx, "DEDUPED")
	if err != nil {
		t.Fatal(err)
	}
	fixed := info.CachedInfo().Config
	fixed.MaxMsgSize = 1 << 20
	if _, err := e.js.UpdateStream(e.ctx, fixed); err != nil {
		t.Fatal(err)
	}
	publish("ingest.acme.gh", "probe", []byte(`{"n":-1}`))
	natstest.Eventually(t, 20*time.Second, func() error {
		m, err := getText(base + "/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(m, `dedupeworker_stream_messages{stream="DEDUPED"} 2`+"\n") {
			return fmt.Errorf("the worker has not read DEDUPED since the fix")
		}
		return nil
	})

	// A dry run changes nothing.
	ingestBefore := e.state("INGEST").LastSeq
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--reason", "output-reject")
	if code != 0 || !strings.Contains(out, "dry run: would replay 3 of the 3 selected dead letters of DEDUPE_DLQ to stream INGEST. Nothing was changed") {
		t.Fatalf("dry run: %d\n%s\n%s", code, out, stderr)
	}
	if got := e.state("INGEST").LastSeq; got != ingestBefore || e.state("DEDUPE_DLQ").Msgs != 4 {
		t.Fatalf("the dry run changed something: INGEST last %d (was %d), DEDUPE_DLQ %+v", got, ingestBefore, e.state("DEDUPE_DLQ"))
	}

	code, out, stderr = runCLI(t, "", "dlq", "replay", "--reason", "output-reject", "--yes")
	if code != 0 || !strings.Contains(out, "replayed 3 of the 3 selected dead letters of DEDUPE_DLQ to stream INGEST and removed them from DEDUPE_DLQ") {
		t.Fatalf("replay: %d\n%s\n%s", code, out, stderr)
	}
	// Each replayed envelope went through the worker: big-1 and big-2 are published once each, the replayed retry
	// of big-1 is a duplicate.
	natstest.Eventually(t, 20*time.Second, func() error {
		m, err := getText(base + "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{`dedupeworker_envelopes_total{outcome="unique",source="gh"} 4`,
			`dedupeworker_envelopes_total{outcome="duplicate",source="gh"} 1`} {
			if !strings.Contains(m, want+"\n") {
				return fmt.Errorf("metrics lack %s", want)
			}
		}
		return nil
	})
	got := map[string]int{}
	for _, m := range readOutputs(t, e.js, 4) {
		got[m.Header.Get("Idempotency-Key")]++
		if k := m.Header.Get("Idempotency-Key"); strings.HasPrefix(k, "acme:gh:big-") && (len(m.Data) < 2000 || m.Header.Get("Dedupe-Status") != "unique") {
			t.Errorf("%s: %d bytes, status %q", k, len(m.Data), m.Header.Get("Dedupe-Status"))
		}
	}
	if want := map[string]int{"acme:gh:big-1": 1, "acme:gh:big-2": 1, "acme:gh:small-1": 1, "acme:gh:probe": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("DEDUPED holds %v, want %v", got, want)
	}
	if n := e.state("DEDUPED").Msgs; n != 4 {
		t.Errorf("DEDUPED holds %d events, want 4", n)
	}
	code, out, _ = runCLI(t, "", "dlq", "ls")
	if rows := rowSeqs(tableRows(t, out)); code != 0 || len(rows) != 1 || !strings.Contains(out, "DEDUPE_DLQ holds 1 dead letter: bad-tenant 1\n") {
		t.Errorf("after the replay: %v\n%s", rows, out)
	}

	// Again: nothing left to replay, nothing published.
	ingestBefore = e.state("INGEST").LastSeq
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--reason", "output-reject", "--yes")
	if code != 0 || !strings.Contains(out, "no dead letter matches the selection: nothing to replay") {
		t.Errorf("replay again: %d\n%s\n%s", code, out, stderr)
	}
	if got := e.state("INGEST").LastSeq; got != ingestBefore {
		t.Errorf("replaying again published: INGEST last %d, was %d", got, ingestBefore)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func getText(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A refused truncated dead letter says whether the input stream still holds its original: the envelope identity
// in the dead letter's Nats-Msg-Id (dlq/<stream>/<seq>/<stored at>) tells the original from a later envelope that
// took its sequence in a stream created again.
func TestDlqTruncatedNamesTheOriginal(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnvWith(t, srv.URL(), []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}}, // limits retention: processed envelopes are kept
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}},
	})
	js, ctx := e.js, e.ctx
	if _, err := js.Publish(ctx, "ingest.acme.gh", []byte("the original")); err != nil {
		t.Fatal(err)
	}
	ingest, _ := js.Stream(ctx, "INGEST")
	orig, err := ingest.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, stamp := range []int64{orig.Time.UnixNano(), orig.Time.UnixNano() + 1} {
		m := nats.NewMsg("dedupe.dlq.output-reject")
		m.Header.Set("Dedupe-Error", "too large")
		m.Header.Set("Dedupe-Subject", "ingest.acme.gh")
		m.Header.Set("Dedupe-Input-Stream", "INGEST")
		m.Header.Set("Dedupe-Input-Seq", "1")
		m.Header.Set("Dedupe-Truncated", "body 3 of 12 bytes kept")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("dlq/INGEST/1/%d", stamp))
		m.Data = []byte("the")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := runCLI(t, "", "dlq", "replay")
	for _, want := range []string{
		"seq 1: truncated: body 3 of 12 bytes kept. A replay would publish what was kept, not the original envelope; stream INGEST still holds the original as message 1 (the stream keeps processed envelopes; consumer dedupeworker does not exist): republish that one instead; --truncated-ok",
		"seq 2: truncated: body 3 of 12 bytes kept. A replay would publish what was kept, not the original envelope; stream INGEST holds another envelope as message 1, not the original (the stream was created again); --truncated-ok",
		"dry run: would replay 0 of the 2 selected dead letters of DEDUPE_DLQ to stream INGEST; 2 refused.",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q: exit %d\n%s%s", want, code, out, stderr)
		}
	}
}
