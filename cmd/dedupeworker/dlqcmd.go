package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
)

const dlqUsage = `Usage:
  dedupeworker dlq ls     [SELECTION] [--limit N] [--json]
  dedupeworker dlq show   SEQ [--body | --json]
  dedupeworker dlq replay [SELECTION] [--limit N] [--truncated-ok] [--force] [--yes] [--json]
  dedupeworker dlq rm     (SEQ | SELECTION | --all) [--limit N] [--yes] [--json]

Dead letters are the envelopes the worker could never process. They are kept in stream DEDUPE_DLQ_STREAM
(DEDUPE_DLQ) on <DEDUPE_DLQ_PREFIX>.<reason> (dedupe.dlq.<reason>) with their headers and body, plus Dedupe-Error
(why), Dedupe-Subject (where they were published) and Dedupe-Input-Seq (their sequence in the input stream).

SELECTION is any of these flags, each narrowing it (--reason and --seq may be repeated or take comma lists):
  --reason R   bad-subject, bad-tenant, bad-source, bad-claim, output-reject or control-header
  --tenant T   the tenant in Dedupe-Subject (<input prefix>.<tenant>.<source>[.<more>])
  --source S   the source in Dedupe-Subject
  --seq LIST   dead-letter sequences: N, N-M, or N- (N and after)

ls      lists the selected dead letters, oldest first: sequence, age, reason, subject, input sequence, error; at
        most --limit of them (default 100, 0 for all), saying when more match. --json prints one object per line.
show    prints one dead letter: its headers and a preview of its body. --body writes only the body, raw, to
        standard output; --json prints one object with the headers and the body.
replay  publishes each selected dead letter (at most --limit; default all) to its Dedupe-Subject with its original
        headers and body (every Dedupe-* and Nats-* header removed), into the input stream (DEDUPE_INPUT_STREAM)
        only, and removes it from the dead-letter stream once the input stream has stored it. Without --yes it is
        a dry run: it prints what it would replay and changes nothing. Refused (result "refused", the detail
        says why; with --yes, exit status 1):
          - a dead letter whose original envelope the input stream still holds for the worker (same sequence
            and stored time; on a stream that keeps processed envelopes, not yet acknowledged by DEDUPE_CONSUMER):
            the worker delivers it again itself, and a replay would process it twice. No flag overrides this;
          - a truncated dead letter (Dedupe-Truncated: the sender's headers were dropped and the body cut),
            unless --truncated-ok;
          - one that can only fail again, unless --force: bad-subject, bad-tenant and bad-source (the worker
            refuses the subject) and control-header (an empty body with a Status header, published again with
            its Status and Description headers as they came, and dead-lettered again).
        Each envelope is published with Nats-Msg-Id replay/, its dead letter's own Nats-Msg-Id (the envelope's
        identity, dlq/<input stream>/<seq>/<stored at>) and a digest of its subject and body (without an id of
        that form: replay/<dlq stream>/<seq>/<stored at>), so a replay interrupted and run again within the input
        stream's duplicate window, or two dead letters of one envelope, store it once. The running worker
        processes the replayed envelopes like any delivery: one whose event was published meanwhile is a
        duplicate. A dead letter whose subject the input stream does not capture is not published (result
        "failed"). A publish without an answer (none in time, or interrupted) may have been stored (result
        "unconfirmed"): run the replay again within the input stream's duplicate window. One stored but not
        removed (result "not-removed"): remove it with dlq rm --seq N --yes; a replay after the duplicate window
        stores it again. After 3 publishes in a row without an answer (none in time, or no stream to give one)
        replay stops. With --yes, exit status 1 when any selected dead letter was not replayed and removed. A dead
        letter replayed and found removed meanwhile (another replay or rm, the stream's limits) is no failure, nor
        is one whose removal got no answer and that is gone (by it, or meanwhile: "removal ... unanswered; the
        letter is gone").

rm      removes the selected dead letters (at most --limit; default all) from the dead-letter stream, for good:
        their headers and body are gone. SEQ alone is --seq SEQ; with no selection it needs --all. Without --yes
        it is a dry run: it prints what it would remove and changes nothing. A dead letter found removed meanwhile
        (another replay or rm, the stream's limits) is "removed-meanwhile", no failure; one found gone after a
        removal without an answer (by it, or meanwhile) is "gone", no failure either.

Nothing here creates a consumer; ls and show change nothing. Connection: the flags below, else DEDUPE_NATS_*, else
NATS_URL / NATS_* and the nats CLI's selected context, else the embedded server's address DEDUPE_EMBEDDED_LISTEN
(see "Connecting" in docs/reference.md). Streams and subjects: the worker's DEDUPE_DLQ_STREAM, DEDUPE_DLQ_PREFIX,
DEDUPE_INPUT_STREAM, DEDUPE_INPUT_PREFIX and DEDUPE_CONSUMER.

`

// dlqRequestTimeout bounds each JetStream request of the dlq commands (a read, a publish, a delete).
var dlqRequestTimeout = 5 * time.Second

// dlqOptions are the parsed flags of a dlq subcommand.
type dlqOptions struct {
	sel         dlqSelection
	limit       int
	asJSON      bool
	body        bool   // show: the raw body only
	seq         uint64 // show: the dead letter
	yes         bool   // replay, rm: act, not a dry run
	all         bool   // rm: every dead letter, when no selection is given
	truncatedOK bool   // replay: replay truncated dead letters too
	force       bool   // replay: replay dead letters that can only fail again too
}

func runDlq(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []string{"ls", "show", "replay", "rm"}
	sub, err := pickSubcommand("dlq", dlqUsage, subs, args, stderr)
	if err != nil {
		return err
	}
	fs := newFlagSet("dlq "+sub, subcommandPage(dlqUsage, "dlq "+sub, subs))
	conn := addConnFlags(fs)
	opts, err := parseDlqArgs(sub, fs, args[1:])
	if err != nil {
		return err
	}
	cfg, nc, err := conn.connectCommand(ctx, "dedupeworker dlq", stderr)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(dlqRequestTimeout))
	if err != nil {
		return failErr(err)
	}
	r, err := openDlqReader(ctx, js, cfg.DLQStream, cfg.DLQPrefix, cfg.InputPrefix)
	if err != nil {
		return failErr(err)
	}
	now := time.Now()
	switch sub {
	case "ls":
		return dlqList(ctx, r, opts, now, stdout, stderr)
	case "show":
		return dlqShow(ctx, r, opts, now, stdout)
	case "rm":
		return dlqRemove(ctx, r, opts, now, stdout, stderr)
	default:
		rp := &dlqReplayer{js: js, r: r, opts: opts, inputStream: cfg.InputStream, consumer: cfg.Consumer, now: now}
		return rp.run(ctx, stdout, stderr)
	}
}

// parseDlqArgs parses the flags of one subcommand; flags and the SEQ of show may come in any order.
func parseDlqArgs(sub string, fs *flag.FlagSet, args []string) (dlqOptions, error) {
	var o dlqOptions
	if sub != "show" {
		fs.Func("reason", "a dead-letter `reason`, or a comma list of them (repeatable)", o.sel.addReasons)
		fs.Func("tenant", "the `tenant` in Dedupe-Subject", func(v string) error { return dlqToken(&o.sel.tenant, v) })
		fs.Func("source", "the `source` in Dedupe-Subject", func(v string) error { return dlqToken(&o.sel.source, v) })
		fs.Func("seq", "dead-letter `sequences`: N, N-M or N-, comma separated (repeatable)", o.sel.addSeqs)
		verb := map[string]string{"ls": "list", "replay": "replay", "rm": "remove"}[sub]
		fs.IntVar(&o.limit, "limit", map[string]int{"ls": 100}[sub], verb+" at most `N` dead letters (0: all)")
		if sub != "ls" {
			fs.BoolVar(&o.yes, "yes", false, verb+" (without it: a dry run)")
		}
	}
	fs.BoolVar(&o.asJSON, "json", false, "one JSON object per line")
	switch sub {
	case "show":
		fs.BoolVar(&o.body, "body", false, "write only the body, raw, to standard output")
	case "rm":
		fs.BoolVar(&o.all, "all", false, "every dead letter (needed when no selection is given)")
	case "replay":
		fs.BoolVar(&o.truncatedOK, "truncated-ok", false, "replay truncated dead letters too (what was kept of them)")
		fs.BoolVar(&o.force, "force", false, "replay dead letters that can only fail again too (bad-subject, "+
			"bad-tenant, bad-source, control-header)")
	}
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return o, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if sub == "rm" {
		for _, p := range pos {
			if err := o.sel.addSeqs(p); err != nil {
				return o, usageErr("dlq rm: SEQ %q: %v", p, err)
			}
		}
		pos = nil
		selected := len(o.sel.reasons) > 0 || o.sel.tenant != "" || o.sel.source != "" || len(o.sel.seqs) > 0
		switch {
		case !selected && !o.all:
			return o, usageErr("dlq rm: say what to remove: SEQ, a selection (--reason, --tenant, --source, --seq), or --all")
		case selected && o.all:
			return o, usageErr("dlq rm: --all and a selection exclude each other")
		}
	}
	if sub != "show" {
		if len(pos) > 0 {
			return o, usageErr("dlq %s: unexpected argument %q (select dead letters with --seq)", sub, pos[0])
		}
		if o.limit < 0 {
			return o, usageErr("dlq %s: --limit: must be 0 (all) or more, got %d", sub, o.limit)
		}
		return o, nil
	}
	switch {
	case len(pos) == 0:
		return o, usageErr("dlq show: SEQ is required: the dead letter's sequence, as dlq ls prints it")
	case len(pos) > 1:
		return o, usageErr("dlq show: one SEQ only, got %q", pos)
	case o.body && o.asJSON:
		return o, usageErr("dlq show: --body and --json exclude each other")
	}
	seq, err := parseDlqSeq(pos[0])
	if err != nil {
		return o, usageErr("dlq show: SEQ: %v", err)
	}
	o.seq = seq
	return o, nil
}

// dlqToken checks a --tenant or --source value: one subject token. Not the id rules: a bad-tenant dead letter's
// tenant breaks them, and may still be selected.
func dlqToken(dst *string, v string) error {
	if v == "" || strings.ContainsAny(v, ". \t\r\n*>") {
		return fmt.Errorf("%q: must be one subject token (no dots, blanks or wildcards)", v)
	}
	*dst = v
	return nil
}

// dlqRecord is a dead letter as dlq ls --json prints it.
type dlqRecord struct {
	Seq         uint64 `json:"seq"`
	Stored      string `json:"stored"`
	AgeSeconds  int64  `json:"age_seconds"`
	Reason      string `json:"reason"`
	Subject     string `json:"subject"`
	Tenant      string `json:"tenant,omitempty"`
	Source      string `json:"source,omitempty"`
	Error       string `json:"error"`
	InputStream string `json:"input_stream,omitempty"`
	InputSeq    uint64 `json:"input_seq,omitempty"`
	Truncated   string `json:"truncated,omitempty"`
	BodyBytes   int    `json:"body_bytes"`
}

func (dl *deadLetter) record(now time.Time) dlqRecord {
	return dlqRecord{
		Seq: dl.seq, Stored: dl.stored.UTC().Format(time.RFC3339Nano), AgeSeconds: int64(max(0, now.Sub(dl.stored)/time.Second)),
		Reason: dl.reason, Subject: dl.subject, Tenant: dl.tenant, Source: dl.source, Error: dl.err,
		InputStream: dl.inputStream, InputSeq: dl.inputSeq, Truncated: dl.truncated, BodyBytes: len(dl.data),
	}
}

// dlqRow writes dl's row of the table people read, cell in the column extra when there is one, after the
// table's header when first.
func dlqRow(tw io.Writer, dl *deadLetter, now time.Time, first bool, extra, cell string) {
	in, why := "-", dl.err
	if dl.inputSeq > 0 {
		in = strconv.FormatUint(dl.inputSeq, 10)
	}
	if dl.truncated != "" {
		why = "[truncated] " + why
	}
	head := []string{"SEQ", "AGE", "REASON", "SUBJECT", "INPUT-SEQ", extra, "ERROR"}
	row := []string{strconv.FormatUint(dl.seq, 10), dlqAge(now.Sub(dl.stored)), dlqCell(dl.reason, 24), dlqCell(dl.subject, 48),
		in, cell, dlqCell(why, 160)}
	if extra == "" {
		head, row = slices.Delete(head, 5, 6), slices.Delete(row, 5, 6)
	}
	if first {
		fmt.Fprintln(tw, strings.Join(head, "\t"))
	}
	fmt.Fprintln(tw, strings.Join(row, "\t"))
}

// notes is where a dlq command writes its closing lines: standard error with --json, whose standard output holds
// only the objects.
func (o dlqOptions) notes(stdout, stderr io.Writer) io.Writer {
	if o.asJSON {
		return stderr
	}
	return stdout
}

func dlqList(ctx context.Context, r *dlqReader, o dlqOptions, now time.Time, stdout, stderr io.Writer) error {
	empty := false // the stream holds nothing: the count line says so, once
	if !o.asJSON {
		counts, err := r.counts(ctx)
		if err != nil {
			return failErr(fmt.Errorf("dlq ls: stream %s: %w", r.name, err))
		}
		fmt.Fprintln(stdout, dlqCountLine(r.name, counts))
		empty = len(counts) == 0
	}
	n, next, err := r.scanLimited(ctx, o, stdout, now, "", func(dl *deadLetter) (any, string, bool) {
		return dl.record(now), "", true
	})
	if err != nil {
		return failErr(err)
	}
	note := o.notes(stdout, stderr)
	switch {
	case next > 0:
		fmt.Fprintf(note, "more dead letters match: these are the first %d; go on with --seq %d- (or --limit 0 for all)\n", n, next)
	case n == 0 && !o.asJSON && !empty:
		fmt.Fprintln(note, "no dead letter matches the selection")
	}
	return nil
}

// dlqCountLine summarises the stream: "DEDUPE_DLQ holds 5 dead letters: bad-tenant 1, output-reject 4".
func dlqCountLine(stream string, counts map[string]uint64) string {
	var total uint64
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		total += counts[r]
		parts = append(parts, fmt.Sprintf("%s %d", r, counts[r]))
	}
	if total == 0 {
		return stream + " holds no dead letters"
	}
	return fmt.Sprintf("%s holds %d dead %s: %s", stream, total, plural(total, "letter", "letters"), strings.Join(parts, ", "))
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// dlqShowRecord is a dead letter as dlq show --json prints it.
type dlqShowRecord struct {
	dlqRecord
	DLQSubject string      `json:"dlq_subject"`
	Headers    nats.Header `json:"headers"`
	Body       *string     `json:"body,omitempty"`        // when the body is valid UTF-8
	BodyBase64 string      `json:"body_base64,omitempty"` // otherwise
}

const dlqPreviewBytes = 1024

func dlqShow(ctx context.Context, r *dlqReader, o dlqOptions, now time.Time, stdout io.Writer) error {
	dl, found, err := r.get(ctx, o.seq)
	if err != nil {
		return failErr(err)
	}
	if !found {
		return failErr(fmt.Errorf("dlq show: stream %s holds no message %d (never written, or removed: replayed, "+
			"deleted, or past DEDUPE_DLQ_MAX_AGE)", r.name, o.seq))
	}
	if o.body {
		_, err := stdout.Write(dl.data)
		return err
	}
	if o.asJSON {
		rec := dlqShowRecord{dlqRecord: dl.record(now), DLQSubject: contract.DeadLetterSubject(r.dlqPrefix, dl.reason), Headers: dl.header}
		if utf8.Valid(dl.data) {
			s := string(dl.data)
			rec.Body = &s
		} else {
			rec.BodyBase64 = base64.StdEncoding.EncodeToString(dl.data)
		}
		return writeJSON(stdout, rec)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	field := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, dlqCell(v, 0)) }
	field("seq:", fmt.Sprintf("%d of stream %s", dl.seq, r.name))
	field("stored:", fmt.Sprintf("%s (%s ago)", dl.stored.UTC().Format(time.RFC3339), dlqAge(now.Sub(dl.stored))))
	field("reason:", dl.reason)
	field("subject:", dl.subject)
	field("error:", dl.err)
	if dl.inputSeq > 0 {
		field("input:", fmt.Sprintf("message %d of stream %s", dl.inputSeq, dl.inputStream))
	}
	if dl.truncated != "" {
		field("truncated:", dl.truncated)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "headers:")
	for _, k := range slices.Sorted(maps.Keys(dl.header)) {
		for _, v := range dl.header[k] {
			fmt.Fprintf(stdout, "  %s: %s\n", dlqCell(k, 0), dlqCell(v, 0))
		}
	}
	fmt.Fprint(stdout, dlqPreview(dl.data))
	return nil
}

// dlqPreview is the body as show prints it: the first KiB as text when it is text, else quoted.
func dlqPreview(body []byte) string {
	head := body[:min(len(body), dlqPreviewBytes)]
	if len(head) < len(body) && !utf8.Valid(head) {
		// Perhaps only the last rune is cut by the preview: drop its first bytes.
		for i := 1; i < utf8.UTFMax && i < len(head); i++ {
			if utf8.Valid(head[:len(head)-i]) {
				head = head[:len(head)-i]
				break
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "body: %d bytes", len(body))
	cut := len(head) < len(body)
	if cut {
		fmt.Fprintf(&b, " (the first %d shown; --body writes it whole)", len(head))
	}
	if len(body) == 0 {
		b.WriteString("\n")
		return b.String()
	}
	text := utf8.Valid(head) && !strings.ContainsFunc(string(head), func(r rune) bool {
		return !unicode.IsPrint(r) && !unicode.IsSpace(r) // IsSpace takes in \t, \n and \r
	})
	if !text {
		b.WriteString(", not text; quoted:\n")
		b.WriteString(strconv.Quote(string(head)))
	} else {
		b.WriteString(":\n")
		b.Write(head)
	}
	if cut {
		b.WriteString(" …")
	}
	b.WriteString("\n")
	return b.String()
}

// dlqCell prints a value in a table cell or a header line: quoted when it holds anything but printable characters
// (a tab would break the table, a CR the line), and cut to at most limit runes (0: no limit).
func dlqCell(s string, limit int) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) || !utf8.ValidString(s) {
		s = strconv.Quote(s)
	}
	if limit > 0 && utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit-1]) + "…"
	}
	return s
}

// dlqAge prints an age in its largest whole unit: 45s, 12m, 5h, 3d.
func dlqAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	default:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
}
