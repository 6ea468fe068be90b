package pipeline_test

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// binaryBody is every byte value, twice: the output must carry it unchanged.
func binaryBody() []byte {
	b := make([]byte, 512)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestUniqueAndDuplicate(t *testing.T) {
	e := newEnv(t)
	w := e.kvWindow()
	e.start(e.config(w))

	body := binaryBody()
	in := hdr(
		"X-GitHub-Delivery", "d-1",
		"X-Custom", "a", "X-Custom", "b",
		// JetStream control headers: the input stream checks the exact-case name (so this one must name it to be
		// stored) and would refuse the republish to the output stream if it were passed on.
		"Nats-Expected-Stream", "INGEST",
		"nats-expected-stream", "nope",
		"Nats-Msg-Id", "publisher-chosen",
		"Idempotency-Key", "forged",
		"dedupe-status", "forged",
		"Content-Type", "application/octet-stream",
	)
	seq := e.publish("ingest.t1.gh", in, body)
	in2 := hdr()
	for k, v := range in {
		in2[k] = v
	}
	in2.Set("Nats-Msg-Id", "publisher-chosen-2")
	seq2 := e.publish("ingest.t1.gh", in2, body) // a retry of the same delivery
	e.drained(10 * time.Second)

	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 1 {
		t.Fatalf("output holds %d messages, want 1", len(out))
	}
	m := out[0]
	if m.Subject != "deduped.t1.gh" {
		t.Errorf("subject %q, want deduped.t1.gh", m.Subject)
	}
	if !bytes.Equal(m.Data, body) {
		t.Errorf("body changed: %x", m.Data)
	}
	ent, ok, err := w.Get(ctx(t), "t1", "gh", "d-1")
	if err != nil || !ok {
		t.Fatalf("window entry: %v %v", ok, err)
	}
	if ent.Claimant.Seq != seq && ent.Claimant.Seq != seq2 { // both copies are in flight together: either may win
		t.Errorf("claimant %v, want an envelope's stream sequence (%d or %d)", ent.Claimant, seq, seq2)
	}
	if ent.Claimant.Stamp <= 0 { // the envelope is gone (work-queue input): its timestamp cannot be read back
		t.Errorf("claimant %v, want the stored envelope's timestamp", ent.Claimant)
	}
	want := map[string]string{
		"Idempotency-Key":     "t1:gh:d-1",
		"Nats-Msg-Id":         "t1:gh:d-1#" + envelopeID(ent.Claimant.Seq, ent.Claimant.Stamp),
		"Dedupe-Input-Stream": "INGEST",
		"Dedupe-Input-Seq":    strconv.FormatUint(ent.Claimant.Seq, 10),
		"Dedupe-Key":          "d-1",
		"Dedupe-Status":       "unique",
		"X-GitHub-Delivery":   "d-1",
		"Content-Type":        "application/octet-stream",
	}
	for k, v := range want {
		if got := header(t, m, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if got := m.Header.Values("X-Custom"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("X-Custom = %q, want [a b]", got)
	}
	for _, name := range headerNames(m) {
		if strings.EqualFold(name, "Nats-Expected-Stream") || name == "dedupe-status" || name == "Dedupe-Reason" ||
			strings.EqualFold(name, "Idempotency-Key") && name != "Idempotency-Key" {
			t.Errorf("header %s must not be passed on", name)
		}
	}
	if got := e.metric("dedupeworker_envelopes_total", "source", "gh", "outcome", "unique"); got != 1 {
		t.Errorf("unique = %v, want 1", got)
	}
	if got := e.metric("dedupeworker_envelopes_total", "source", "gh", "outcome", "duplicate"); got != 1 {
		t.Errorf("duplicate = %v, want 1", got)
	}
	// Both copies are in flight together: the second may find the first's claim undecided and be handed back
	// until it is published (one more claim each time).
	waited := e.metric("dedupeworker_naks_total", "reason", pipeline.NakHolderUndecided)
	if got := e.metric("dedupeworker_claim_duration_seconds"); got != 2+waited {
		t.Errorf("claims observed = %v, want 2 + %v handed back while the holder was undecided", got, waited)
	}
	if got := e.metric("dedupeworker_sources_without_dedupe"); got != 1 {
		t.Errorf("sources_without_dedupe = %v, want 1", got)
	}
	if got := e.metric("dedupeworker_ready"); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
}

func TestDuplicateCopies(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.DuplicatesPrefix = "dupes"
	e.start(cfg)
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "x"), []byte("1"))
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "x"), []byte("2"))
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d messages, want the event and one duplicate copy", len(out))
	}
	// The two copies are in flight together: either may win the claim.
	byStatus := map[string]string{}
	for _, m := range out {
		byStatus[header(t, m, "Dedupe-Status")] = m.Subject + " " + string(m.Data)
	}
	u, d := byStatus["unique"], byStatus["duplicate"]
	if !(u == "deduped.t1.gh 1" && d == "dupes.t1.gh 2" || u == "deduped.t1.gh 2" && d == "dupes.t1.gh 1") {
		t.Errorf("outputs %v", byStatus)
	}
	for _, m := range out {
		if header(t, m, "Dedupe-Status") == "duplicate" &&
			(header(t, m, "Idempotency-Key") != "t1:gh:x" || !strings.HasPrefix(header(t, m, "Nats-Msg-Id"), "dup/INGEST/")) {
			t.Errorf("duplicate copy headers %v", m.Header)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(e.kvWindow()))
	for _, tenant := range []string{"acme", "globex", "acme", "globex"} {
		e.publish("ingest."+tenant+".gh", hdr("X-GitHub-Delivery", "same-id"), []byte(tenant))
	}
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	var subjects []string
	for _, m := range out {
		subjects = append(subjects, m.Subject)
	}
	slices.Sort(subjects)
	if !slices.Equal(subjects, []string{"deduped.acme.gh", "deduped.globex.gh"}) {
		t.Errorf("outputs %q, want one per tenant", subjects)
	}
}

func TestUnkeyedReasons(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(memWindow()))
	big := `{"id":"1","pad":"` + strings.Repeat("x", maxJSON) + `"}`
	cases := []struct {
		name, subject string
		hdr           nats.Header
		body          string
		reason        string
		label         string
		copies        int // each copy is forwarded: unkeyed events are never deduplicated
	}{
		{"declared without dedupe", "ingest.t.legacy", hdr("X-GitHub-Delivery", "k"), "a", "no-dedupe", "legacy", 2},
		{"undeclared source", "ingest.t.mystery", nil, "b", "no-dedupe", "other", 2},
		{"missing header", "ingest.t.gh", hdr("X-Other", "1"), "c", "missing", "gh", 1},
		{"missing member", "ingest.t.orders", nil, `{"no_id":1}`, "missing", "orders", 1},
		{"too large", "ingest.t.orders", nil, big, "too-large", "orders", 1},
		{"not json", "ingest.t.orders", nil, `{"id":`, "not-json", "orders", 1},
		{"unverified", "ingest.t.gh", hdr("X-GitHub-Delivery", "u-1", "ingest-verified", "FALSE"), "d", "unverified", "gh", 2},
	}
	seqs := map[uint64]string{}
	for _, c := range cases {
		for range c.copies {
			seqs[e.publish(c.subject, c.hdr, []byte(c.body))] = c.name
		}
	}
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != len(seqs) {
		t.Fatalf("output holds %d messages, want %d", len(out), len(seqs))
	}
	got := map[string][]string{}
	for _, m := range out {
		id := header(t, m, "Idempotency-Key")
		seq, stamp, ok := parseUnkeyedID(id)
		if !ok || stamp <= 0 || id != "msg/"+envelopeID(seq, stamp) {
			t.Errorf("unkeyed Idempotency-Key %q, want msg/INGEST/<seq>/<stored at, unix ns>", id)
			continue
		}
		if header(t, m, "Nats-Msg-Id") != id {
			t.Errorf("Nats-Msg-Id %q, want %q", header(t, m, "Nats-Msg-Id"), id)
		}
		if header(t, m, "Dedupe-Status") != "unkeyed" {
			t.Errorf("Dedupe-Status %q", header(t, m, "Dedupe-Status"))
		}
		if k := header(t, m, "Dedupe-Key"); k != "" {
			t.Errorf("unkeyed event carries Dedupe-Key %q", k)
		}
		got[seqs[seq]] = append(got[seqs[seq]], header(t, m, "Dedupe-Reason"))
	}
	for _, c := range cases {
		reasons := got[c.name]
		if len(reasons) != c.copies || reasons[0] != c.reason {
			t.Errorf("%s: reasons %q, want %d × %s", c.name, reasons, c.copies, c.reason)
		}
		if n := e.metric("dedupeworker_unkeyed_total", "source", c.label, "reason", c.reason); n == 0 {
			t.Errorf("%s: unkeyed_total{source=%s,reason=%s} = 0", c.name, c.label, c.reason)
		}
	}
	if n := e.metric("dedupeworker_envelopes_total", "outcome", "unkeyed"); n != float64(len(seqs)) {
		t.Errorf("envelopes_total{outcome=unkeyed} = %v, want %d", n, len(seqs))
	}
}

func TestDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(memWindow()))
	long := strings.Repeat("t", 65)
	cases := []struct{ subject, reason, err string }{
		{"ingest.onlytenant", "bad-subject", `subject "ingest.onlytenant" is not of the form ingest.<tenant>.<source>[.<more>...]`},
		{"ingest.t1.s+rc.push", "bad-source", `source "s+rc" must be 1-64 characters of [A-Za-z0-9_-]`},
		{"ingest.ten@nt.gh", "bad-tenant", `tenant "ten@nt" must be 1-64 characters of [A-Za-z0-9_-]`},
		{"ingest." + long + ".gh", "bad-tenant", `tenant "` + long + `" must be 1-64 characters of [A-Za-z0-9_-]`},
		{"ingest.t1.s+rc", "bad-source", `source "s+rc" must be 1-64 characters of [A-Za-z0-9_-]`},
		{"ingest.t1.sourcé", "bad-source", `source "sourcé" must be 1-64 characters of [A-Za-z0-9_-]`},
	}
	body := binaryBody()
	for _, c := range cases {
		e.publish(c.subject, hdr("X-GitHub-Delivery", "k", "Nats-Expected-Stream", "INGEST", "X-Trace", c.subject), body)
	}
	e.drained(10 * time.Second)
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Errorf("output holds %d messages, want 0", n)
	}
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != len(cases) {
		t.Fatalf("dead letters: %d, want %d", len(dl), len(cases))
	}
	bySubject := map[string]*jetstream.RawStreamMsg{}
	for _, m := range dl {
		bySubject[header(t, m, "Dedupe-Subject")] = m
	}
	for _, c := range cases {
		m := bySubject[c.subject]
		if m == nil {
			t.Errorf("%s: no dead letter", c.subject)
			continue
		}
		if m.Subject != "dedupe.dlq."+c.reason {
			t.Errorf("%s: dead letter subject %q, want dedupe.dlq.%s", c.subject, m.Subject, c.reason)
		}
		if got := header(t, m, "Dedupe-Error"); got != c.err {
			t.Errorf("%s: Dedupe-Error %q, want %q", c.subject, got, c.err)
		}
		if got := header(t, m, "Dedupe-Subject"); got != c.subject {
			t.Errorf("Dedupe-Subject %q, want %q", got, c.subject)
		}
		if header(t, m, "X-Trace") != c.subject || header(t, m, "X-GitHub-Delivery") != "k" {
			t.Errorf("%s: inbound headers lost: %v", c.subject, m.Header)
		}
		if m.Header.Get("Nats-Expected-Stream") != "" {
			t.Errorf("%s: Nats-Expected-Stream passed on", c.subject)
		}
		if !bytes.Equal(m.Data, body) {
			t.Errorf("%s: body changed", c.subject)
		}
	}
	if n := e.metric("dedupeworker_envelopes_total", "outcome", "dead-letter"); n != float64(len(cases)) {
		t.Errorf("dead-letter = %v, want %d", n, len(cases))
	}
	if n := strings.Count(e.log.String(), "pipeline: dead letter"); n != len(cases) {
		t.Errorf("%d dead-letter log lines, want %d", n, len(cases))
	}
	// Each line names the command that lists it (its seq is the input sequence, dlq ls's INPUT-SEQ column).
	for _, reason := range []string{"bad-subject", "bad-source", "bad-tenant"} {
		if !strings.Contains(e.log.String(), "dedupeworker dlq ls --reason "+reason) {
			t.Errorf("no dead-letter log line names dlq ls --reason %s:\n%s", reason, e.log.String())
		}
	}
}

func TestTTLExpiryReadmits(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(e.kvWindow()))
	send := func(i int) {
		e.publish("ingest.t1.short", hdr("X-Event-Id", "ev-1"), []byte(strconv.Itoa(i)))
		e.drained(10 * time.Second)
	}
	send(0)
	send(1) // within the 1s TTL: a duplicate
	if n := e.count(pipeline.DefaultOutputStream); n != 1 {
		t.Fatalf("output holds %d messages after the copy, want 1", n)
	}
	i := 2
	natstest.Eventually(t, 10*time.Second, func() error {
		send(i)
		i++
		if n := e.count(pipeline.DefaultOutputStream); n != 2 {
			return fmt.Errorf("output holds %d messages", n)
		}
		return nil
	})
	out := e.messages(pipeline.DefaultOutputStream)
	id0, id1 := header(t, out[0], "Nats-Msg-Id"), header(t, out[1], "Nats-Msg-Id")
	if id0 == id1 || !strings.HasPrefix(id1, "t1:short:ev-1#") {
		t.Errorf("Nats-Msg-Ids %q and %q: the re-admitted event needs a new one", id0, id1)
	}
}

// TestDeeperSubjects: an ingest service may add tokens after the source; they stay on the output subject, while
// the window's scope stays tenant and source.
func TestDeeperSubjects(t *testing.T) {
	e := newEnv(t)
	e.start(e.config(e.kvWindow()))
	e.publish("ingest.t1.gh.push", hdr("X-GitHub-Delivery", "deep-1"), []byte("push"))
	e.drained(10 * time.Second)
	e.publish("ingest.t1.gh.pull_request.opened", hdr("X-GitHub-Delivery", "deep-1"), []byte("again"))
	e.publish("ingest.t1.legacy.a.b", nil, []byte("unkeyed"))
	e.drained(10 * time.Second)
	out := e.messages(pipeline.DefaultOutputStream)
	if len(out) != 2 {
		t.Fatalf("output holds %d, want 2 (the copy on another event subject is a duplicate)", len(out))
	}
	subjects := map[string]bool{}
	for _, m := range out {
		subjects[m.Subject] = true
		if got := header(t, m, "Dedupe-Input-Seq"); got == "" {
			t.Errorf("%s: no Dedupe-Input-Seq", m.Subject)
		}
	}
	if !subjects["deduped.t1.gh.push"] || !subjects["deduped.t1.legacy.a.b"] {
		t.Errorf("output subjects %v, want deduped.t1.gh.push and deduped.t1.legacy.a.b", subjects)
	}
	if got := header(t, out[0], "Idempotency-Key"); out[0].Subject == "deduped.t1.gh.push" && got != "t1:gh:deep-1" {
		t.Errorf("Idempotency-Key %q, want t1:gh:deep-1", got)
	}
}
