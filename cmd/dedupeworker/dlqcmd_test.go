package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

func TestDlqParseSeqs(t *testing.T) {
	const open = math.MaxUint64
	cases := []struct {
		in   string
		want dlqSeqSet
		err  string
	}{
		{"5", dlqSeqSet{{5, 5}}, ""},
		{"1-3", dlqSeqSet{{1, 3}}, ""},
		{"10-", dlqSeqSet{{10, open}}, ""},
		{"7,1-3,2", dlqSeqSet{{1, 3}, {7, 7}}, ""},
		{"1-3,4-6", dlqSeqSet{{1, 6}}, ""}, // adjacent ranges join
		{"5-,1-2", dlqSeqSet{{1, 2}, {5, open}}, ""},
		{"1-2,2-", dlqSeqSet{{1, open}}, ""},
		{"20-,3,30-40", dlqSeqSet{{3, 3}, {20, open}}, ""},
		{" 4 , 6 ", dlqSeqSet{{4, 4}, {6, 6}}, ""},
		{"3-1", nil, "ends before it starts"},
		{"0", nil, "from 1"},
		{"0-4", nil, "from 1"},
		{"", nil, "empty element"},
		{"1,,2", nil, "empty element"},
		{"x", nil, "whole number"},
		{"-5", nil, "whole number"},
		{"1-x", nil, "whole number"},
		{"1-2-3", nil, "whole number"},
	}
	for _, tc := range cases {
		got, err := parseDlqSeqs(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
	set, _ := parseDlqSeqs("2-4,9-")
	for seq, want := range map[uint64]bool{1: false, 2: true, 4: true, 5: false, 8: false, 9: true, 1 << 40: true} {
		if set.contains(seq) != want {
			t.Errorf("2-4,9- contains %d: %v", seq, !want)
		}
	}
	if !(dlqSeqSet{}).contains(7) {
		t.Error("an empty set selects every sequence")
	}
}

func TestDlqParseArgs(t *testing.T) {
	parse := func(sub string, args ...string) (dlqOptions, error) {
		return parseDlqArgs(sub, newFlagSet("dlq "+sub, ""), args)
	}
	o, err := parse("ls", "--reason", "output-reject,bad-tenant", "--reason", "output-reject", "--tenant", "acme",
		"--source", "gh", "--seq", "9-", "--seq", "1-3", "--limit", "5", "--json")
	want := dlqSelection{reasons: []string{"output-reject", "bad-tenant"}, tenant: "acme", source: "gh",
		seqs: dlqSeqSet{{1, 3}, {9, math.MaxUint64}}}
	if err != nil || !reflect.DeepEqual(o.sel, want) || o.limit != 5 || !o.asJSON {
		t.Fatalf("ls: %+v %v", o, err)
	}
	if o.sel.filterSubject("dedupe.dlq") != "dedupe.dlq.>" {
		t.Errorf("two reasons filter on %q", o.sel.filterSubject("dedupe.dlq"))
	}
	if o, _ := parse("ls", "--reason", "bad-claim"); o.sel.filterSubject("x.dlq") != "x.dlq.bad-claim" || o.limit != 100 {
		t.Errorf("one reason: %q, limit %d", o.sel.filterSubject("x.dlq"), o.limit)
	}
	if o, _ := parse("replay"); o.limit != 0 || o.yes || o.truncatedOK || o.force {
		t.Errorf("replay defaults: %+v", o)
	}
	if o, _ := parse("replay", "--yes", "--truncated-ok", "--force", "--reason", "control-header"); !o.yes || !o.truncatedOK || !o.force {
		t.Errorf("replay --yes --truncated-ok --force: %+v", o)
	}
	for _, args := range [][]string{{"7", "--body"}, {"--body", "7"}} {
		if o, err := parse("show", args...); err != nil || o.seq != 7 || !o.body {
			t.Errorf("show %v: %+v %v", args, o, err)
		}
	}

	// Usage errors are found before any connection: exit status 2 with no server at all.
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"dlq"}, "subcommand is required"},
		{[]string{"dlq", "purge"}, `unknown subcommand "purge"`},
		{[]string{"dlq", "rm"}, "say what to remove"},
		{[]string{"dlq", "rm", "--all", "--seq", "1"}, "--all and a selection exclude each other"},
		{[]string{"dlq", "rm", "x"}, "whole number"},
		{[]string{"dlq", "ls", "--reason", "output-rejected"}, "not a dead-letter reason"},
		{[]string{"dlq", "ls", "--seq", "3-1"}, "ends before it starts"},
		{[]string{"dlq", "ls", "--tenant", "a.b"}, "one subject token"},
		{[]string{"dlq", "ls", "--source", "*"}, "one subject token"},
		{[]string{"dlq", "ls", "--limit", "-1"}, "--limit"},
		{[]string{"dlq", "ls", "12"}, `unexpected argument "12"`},
		{[]string{"dlq", "replay", "--body"}, "flag provided but not defined"},
		{[]string{"dlq", "ls", "--force"}, "flag provided but not defined"},
		{[]string{"dlq", "show"}, "SEQ is required"},
		{[]string{"dlq", "show", "1", "2"}, "one SEQ only"},
		{[]string{"dlq", "show", "x"}, "whole number"},
		{[]string{"dlq", "show", "1", "--body", "--json"}, "exclude each other"},
		{[]string{"dlq", "show", "1", "--reason", "bad-claim"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(t, "", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	for _, args := range [][]string{{"dlq", "-h"}, {"help", "dlq"}, {"dlq", "ls", "-h"}, {"dlq", "show", "--help"}} {
		code, stdout, stderr := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(stdout, "dedupeworker dlq "+map[bool]string{true: "", false: args[1]}[len(args) == 2]) {
			t.Errorf("%v: exit %d, %q %q", args, code, stdout, stderr)
		}
	}
	t.Setenv("DEDUPE_NATS_CONNECT_TIMEOUT", "1s")
	code, _, stderr := runCLI(t, "", "dlq", "ls")
	if code != 1 || stderr == "" {
		t.Errorf("no server: exit %d, %q", code, stderr)
	}
	if code, out, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(out, "dlq ls|show|replay") {
		t.Errorf("help lacks the dlq command: %s", out)
	}
}

// A replay publishes the original headers: every Dedupe-* (the worker's) and Nats-* (JetStream's) header goes,
// whatever its letter case; everything else stays, values in order.
func TestDlqReplayHeaders(t *testing.T) {
	cases := []struct {
		name string
		in   nats.Header
		want nats.Header
	}{
		{"dead letter", nats.Header{
			"Dedupe-Error": {"too large"}, "Dedupe-Subject": {"ingest.acme.gh"}, "Dedupe-Input-Seq": {"7"},
			"Dedupe-Input-Stream": {"INGEST"}, "Nats-Msg-Id": {"dlq/INGEST/7/1"}, "X-GitHub-Delivery": {"d1"},
		}, nats.Header{"X-GitHub-Delivery": {"d1"}}},
		{"truncated", nats.Header{"Dedupe-Truncated": {"sender headers dropped"}, "Dedupe-Error": {"x"}}, nats.Header{}},
		{"any letter case", nats.Header{"dedupe-subject": {"a"}, "DEDUPE-ERROR": {"b"}, "nats-expected-stream": {"X"},
			"NATS-MSG-ID": {"y"}, "Content-Type": {"application/json"}}, nats.Header{"Content-Type": {"application/json"}}},
		{"direct get metadata", nats.Header{"Nats-Stream": {"DEDUPE_DLQ"}, "Nats-Sequence": {"3"},
			"Nats-Time-Stamp": {"2026-01-01T00:00:00Z"}, "Nats-Subject": {"dedupe.dlq.bad-tenant"}, "A": {"1"}},
			nats.Header{"A": {"1"}}},
		{"kept: the sender's own and look-alikes", nats.Header{
			"Idempotency-Key": {"k"}, "Ingest-Verified": {"false"}, "X-Dedupe-Error": {"mine"}, "Dedupe": {"no dash"},
			"Natsy": {"n"}, "Stripe-Signature": {"t=1,v1=a", "t=1,v1=b"},
		}, nats.Header{"Idempotency-Key": {"k"}, "Ingest-Verified": {"false"}, "X-Dedupe-Error": {"mine"},
			"Dedupe": {"no dash"}, "Natsy": {"n"}, "Stripe-Signature": {"t=1,v1=a", "t=1,v1=b"}}},
		{"control header, renamed by the worker", nats.Header{"Dedupe-Original-Status": {"409"},
			"Dedupe-Original-Description": {"Consumer Deleted"}, "Dedupe-Error": {"x"}, "A": {"1"}},
			nats.Header{"Status": {"409"}, "Description": {"Consumer Deleted"}, "A": {"1"}}},
		{"control header, as it came", nats.Header{"Status": {"400"}, "Dedupe-Error": {"x"}}, nats.Header{"Status": {"400"}}},
		{"none", nil, nats.Header{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := dlqReplayHeaders(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if v := tc.in["Stripe-Signature"]; len(v) > 0 {
				v[0] = "changed"
				if got["Stripe-Signature"][0] == "changed" {
					t.Fatal("the replay's header values share storage with the dead letter's")
				}
			}
		})
	}
}

func TestDlqSubjectMatch(t *testing.T) {
	cases := []struct {
		pattern, subject string
		want             bool
	}{
		{"ingest.>", "ingest.acme.gh", true},
		{"ingest.>", "ingest.acme", true},
		{"ingest.>", "ingest", false},
		{"ingest.*.*", "ingest.acme.gh", true},
		{"ingest.*.*", "ingest.acme.gh.push", false},
		{"ingest.*.>", "ingest.acme.gh.push", true},
		{"ingest.acme.gh", "ingest.acme.gh", true},
		{"ingest.acme.gh", "ingest.acme.github", false},
		{">", "anything.at.all", true},
		{"other.>", "ingest.acme.gh", false},
	}
	for _, tc := range cases {
		if got := dlqCaptures([]string{tc.pattern}, tc.subject); got != tc.want {
			t.Errorf("%q ~ %q: %v", tc.pattern, tc.subject, got)
		}
	}
}

func TestDlqSelectionMatch(t *testing.T) {
	dl := func(seq uint64, reason, subject string) *deadLetter {
		m := &jetstream.RawStreamMsg{Subject: "dedupe.dlq." + reason, Sequence: seq,
			Header: nats.Header{"Dedupe-Subject": {subject}}}
		return newDeadLetter(m, "dedupe.dlq", "ingest")
	}
	seqs, _ := parseDlqSeqs("1-5")
	cases := []struct {
		sel  dlqSelection
		dl   *deadLetter
		want bool
	}{
		{dlqSelection{}, dl(9, "bad-subject", "ingest.acme"), true},
		{dlqSelection{tenant: "acme"}, dl(1, "output-reject", "ingest.acme.gh"), true},
		{dlqSelection{tenant: "acme", source: "gh"}, dl(1, "output-reject", "ingest.acme.gh.push.extra"), true},
		{dlqSelection{tenant: "acme"}, dl(1, "bad-subject", "ingest.acme"), false}, // no source: no tenant either
		{dlqSelection{tenant: "acme"}, dl(1, "bad-subject", "other.acme.gh"), false},
		{dlqSelection{source: "gh"}, dl(1, "output-reject", "ingest.globex.gh"), true},
		{dlqSelection{source: "gh"}, dl(1, "output-reject", "ingest.globex.github"), false},
		{dlqSelection{tenant: "ac!me"}, dl(1, "bad-tenant", "ingest.ac!me.gh"), true},
		{dlqSelection{reasons: []string{"bad-tenant", "bad-source"}}, dl(1, "bad-source", "ingest.a.b"), true},
		{dlqSelection{reasons: []string{"bad-tenant"}}, dl(1, "bad-source", "ingest.a.b"), false},
		{dlqSelection{seqs: seqs}, dl(5, "bad-source", "ingest.a.b"), true},
		{dlqSelection{seqs: seqs}, dl(6, "bad-source", "ingest.a.b"), false},
	}
	for i, tc := range cases {
		if got := tc.sel.match(tc.dl); got != tc.want {
			t.Errorf("case %d: %+v matches %+v: %v", i, tc.sel, tc.dl, got)
		}
	}
}

// dlqEnv is a server with the streams the worker provisions (no worker): dead letters are written the way the
// worker writes them.
type dlqEnv struct {
	t   *testing.T
	js  jetstream.JetStream
	ctx context.Context
}

func newDlqEnv(t *testing.T, url string, opts ...nats.Option) *dlqEnv {
	t.Helper()
	return newDlqEnvWith(t, url, []jetstream.StreamConfig{
		{Name: "INGEST", Subjects: []string{"ingest.>"}, Retention: jetstream.WorkQueuePolicy},
		{Name: "DEDUPE_DLQ", Subjects: []string{"dedupe.dlq.>"}},
	}, opts...)
}

// newDlqEnvWith is newDlqEnv with the given streams in place of the worker's.
func newDlqEnvWith(t *testing.T, url string, streams []jetstream.StreamConfig, opts ...nats.Option) *dlqEnv {
	t.Helper()
	nc := natstest.Connect(t, url, opts...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &dlqEnv{t: t, js: js, ctx: ctx}
	for _, cfg := range streams {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// deadLetter stores a dead letter as the worker builds it (buildDeadLetter, buildTrimmedDeadLetter) and returns
// its sequence.
func (e *dlqEnv) deadLetter(reason, subject string, inputSeq uint64, why string, hdr nats.Header, body []byte, truncated string) uint64 {
	e.t.Helper()
	m := nats.NewMsg("dedupe.dlq." + reason)
	for k, v := range hdr {
		m.Header[k] = v
	}
	m.Header.Set("Dedupe-Error", why)
	m.Header.Set("Dedupe-Subject", subject)
	m.Header.Set("Nats-Msg-Id", fmt.Sprintf("dlq/INGEST/%d/%d", inputSeq, time.Now().UnixNano()))
	m.Header.Set("Dedupe-Input-Stream", "INGEST")
	m.Header.Set("Dedupe-Input-Seq", strconv.FormatUint(inputSeq, 10))
	if truncated != "" {
		m.Header.Set("Dedupe-Truncated", truncated)
	}
	m.Data = body
	ack, err := e.js.PublishMsg(e.ctx, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func (e *dlqEnv) state(stream string) jetstream.StreamState {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State
}

// tableRows returns the rows of the table in out (the lines after the SEQ header), split into fields.
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "SEQ "):
			in = true
		case in && l == "":
			in = false
		case in:
			if f := strings.Fields(l); len(f) > 0 && regexp.MustCompile(`^\d+$`).MatchString(f[0]) {
				rows = append(rows, f)
			} else {
				in = false
			}
		}
	}
	return rows
}

func rowSeqs(rows [][]string) []string {
	var s []string
	for _, r := range rows {
		s = append(s, r[0])
	}
	return s
}

func TestDlqListAndShow(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())

	code, out, stderr := runCLI(t, "", "dlq", "ls")
	if code != 0 || strings.TrimSpace(out) != "DEDUPE_DLQ holds no dead letters" {
		t.Fatalf("empty: %d %q %q", code, out, stderr)
	}

	big := []byte(`{"payload":"` + strings.Repeat("x", 3000) + `"}`)
	e.deadLetter("output-reject", "ingest.acme.gh", 11, "the event would be 3100 bytes, over stream DEDUPED's maximum message size of 1024",
		nats.Header{"X-GitHub-Delivery": {"d1"}}, big, "") // 1
	e.deadLetter("bad-tenant", "ingest.ac!me.gh", 12, `tenant "ac!me" must be 1-64 characters of [A-Za-z0-9_-]`, nil, []byte("{}"), "")           // 2
	e.deadLetter("bad-subject", "ingest.acme", 13, `subject "ingest.acme" is not of the form ingest.<tenant>.<source>[.<more>...]`, nil, nil, "") // 3
	e.deadLetter("output-reject", "ingest.globex.stripe.charge", 14, "the event's header block would be 70000 bytes",
		nil, []byte{0xff, 0x00, 'b', 'i', 'n'}, "sender headers (70000 bytes) dropped; body 5 of 5 bytes kept; the original is message 14 of stream INGEST") // 4
	e.deadLetter("output-reject", "ingest.acme.gh", 15, "tab\there", nil, []byte("line1\nline2"), "") // 5

	code, out, stderr = runCLI(t, "", "dlq", "ls")
	if code != 0 {
		t.Fatalf("ls: %d %q", code, stderr)
	}
	if !strings.Contains(out, "DEDUPE_DLQ holds 5 dead letters: bad-subject 1, bad-tenant 1, output-reject 3\n") {
		t.Errorf("ls count line:\n%s", out)
	}
	rows := tableRows(t, out)
	if got := rowSeqs(rows); !reflect.DeepEqual(got, []string{"1", "2", "3", "4", "5"}) {
		t.Fatalf("ls rows %v:\n%s", got, out)
	}
	if r := rows[0]; r[1] != "0s" || r[2] != "output-reject" || r[3] != "ingest.acme.gh" || r[4] != "11" || r[5] != "the" {
		t.Errorf("row 1: %q", r)
	}
	if !strings.Contains(out, `[truncated] the event's header block`) || !strings.Contains(out, `"tab\there"`) {
		t.Errorf("ls marks truncation and quotes a tab:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--reason", "output-reject"}, []string{"1", "4", "5"}},
		{[]string{"--reason", "bad-tenant,bad-subject"}, []string{"2", "3"}},
		{[]string{"--tenant", "acme"}, []string{"1", "5"}},
		{[]string{"--tenant", "ac!me"}, []string{"2"}},
		{[]string{"--source", "stripe"}, []string{"4"}},
		{[]string{"--seq", "2-3,5"}, []string{"2", "3", "5"}},
		{[]string{"--seq", "4-", "--reason", "output-reject", "--tenant", "acme"}, []string{"5"}},
		{[]string{"--seq", "6-"}, nil},
	} {
		code, out, stderr := runCLI(t, "", append([]string{"dlq", "ls"}, tc.args...)...)
		if got := rowSeqs(tableRows(t, out)); code != 0 || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ls %v: exit %d, rows %v, want %v\n%s%s", tc.args, code, got, tc.want, out, stderr)
		}
		if strings.Contains(out, "more dead letters match") {
			t.Errorf("ls %v says more match:\n%s", tc.args, out)
		}
	}

	// A bounded listing says where to go on.
	code, out, _ = runCLI(t, "", "dlq", "ls", "--limit", "2")
	if got := rowSeqs(tableRows(t, out)); code != 0 || !reflect.DeepEqual(got, []string{"1", "2"}) ||
		!strings.Contains(out, "more dead letters match: these are the first 2; go on with --seq 3-") {
		t.Errorf("ls --limit 2: %d %v\n%s", code, got, out)
	}
	code, out, _ = runCLI(t, "", "dlq", "ls", "--limit", "2", "--reason", "output-reject")
	if got := rowSeqs(tableRows(t, out)); code != 0 || !reflect.DeepEqual(got, []string{"1", "4"}) || !strings.Contains(out, "--seq 5-") {
		t.Errorf("ls --limit 2 --reason output-reject: %d %v\n%s", code, got, out)
	}

	// --json: one object per line on standard output, the note on standard error.
	code, out, stderr = runCLI(t, "", "dlq", "ls", "--json", "--limit", "4")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(stderr, "--seq 5-") {
		t.Fatalf("ls --json: %d\n%s\n%s", code, out, stderr)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &rec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"seq": 4.0, "reason": "output-reject", "subject": "ingest.globex.stripe.charge",
		"tenant": "globex", "source": "stripe", "input_stream": "INGEST", "input_seq": 14.0, "body_bytes": 5.0} {
		if rec[k] != want {
			t.Errorf("ls --json %s = %v, want %v", k, rec[k], want)
		}
	}
	if !strings.HasPrefix(rec["truncated"].(string), "sender headers") || rec["error"] == "" || rec["stored"] == "" {
		t.Errorf("ls --json: %v", rec)
	}
	rec = nil
	if err := json.Unmarshal([]byte(lines[2]), &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec["tenant"]; ok {
		t.Errorf("a bad-subject dead letter has no tenant: %v", rec)
	}

	// show: fields, headers, and a preview of the body; --body is the body alone.
	spaces := regexp.MustCompile(` +`)
	code, out, stderr = runCLI(t, "", "dlq", "show", "1")
	for _, want := range []string{"seq: 1 of stream DEDUPE_DLQ\n", "reason: output-reject\n", "subject: ingest.acme.gh\n",
		"input: message 11 of stream INGEST\n", "headers:\n", "\n Dedupe-Subject: ingest.acme.gh\n", "\n X-GitHub-Delivery: d1\n",
		"\n Nats-Msg-Id: dlq/INGEST/11/", "\nbody: 3014 bytes (the first 1024 shown; --body writes it whole):\n{\"payload\":\"xxx"} {
		if code != 0 || !strings.Contains(spaces.ReplaceAllString(out, " "), want) {
			t.Errorf("show 1 lacks %q:\n%s%s", want, out, stderr)
		}
	}
	if strings.Contains(out, "truncated:") {
		t.Errorf("show 1 says truncated:\n%s", out)
	}
	code, out, _ = runCLI(t, "", "dlq", "show", "4")
	if code != 0 || !strings.Contains(spaces.ReplaceAllString(out, " "), "truncated: sender headers (70000 bytes) dropped") ||
		!strings.Contains(out, "body: 5 bytes, not text; quoted:\n\"\\xff\\x00bin\"\n") {
		t.Errorf("show 4:\n%s", out)
	}
	code, out, _ = runCLI(t, "", "dlq", "show", "--body", "1")
	if code != 0 || out != string(big) {
		t.Errorf("show --body: %d, %d bytes", code, len(out))
	}
	code, out, _ = runCLI(t, "", "dlq", "show", "4", "--body")
	if code != 0 || out != "\xff\x00bin" {
		t.Errorf("show 4 --body: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "", "dlq", "show", "5", "--json")
	var shown struct {
		Seq        uint64              `json:"seq"`
		DLQSubject string              `json:"dlq_subject"`
		Headers    map[string][]string `json:"headers"`
		Body       *string             `json:"body"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.Seq != 5 || shown.Body == nil ||
		*shown.Body != "line1\nline2" || shown.Headers["Dedupe-Error"][0] != "tab\there" || shown.DLQSubject != "dedupe.dlq.output-reject" {
		t.Errorf("show 5 --json: %d %v %s", code, err, out)
	}
	code, out, _ = runCLI(t, "", "dlq", "show", "4", "--json")
	if code != 0 || !strings.Contains(out, `"body_base64":"/wBiaW4="`) || strings.Contains(out, `"body":`) {
		t.Errorf("show 4 --json: %s", out)
	}
	code, _, stderr = runCLI(t, "", "dlq", "show", "99")
	if code != 1 || !strings.Contains(stderr, "stream DEDUPE_DLQ holds no message 99") {
		t.Errorf("show 99: %d %q", code, stderr)
	}

	// Reading changed nothing, and created no consumer.
	if st := e.state("DEDUPE_DLQ"); st.Msgs != 5 || st.Consumers != 0 {
		t.Errorf("after reads: %+v", st)
	}

	// A stream that is not there is named.
	t.Setenv("DEDUPE_DLQ_STREAM", "NOPE")
	code, _, stderr = runCLI(t, "", "dlq", "ls")
	if code != 1 || !strings.Contains(stderr, "stream NOPE does not exist") {
		t.Errorf("missing stream: %d %q", code, stderr)
	}
}
