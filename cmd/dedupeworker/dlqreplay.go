package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Results of replaying one dead letter.
const (
	dlqWouldReplay   = "would-replay"   // dry run: it would be replayed
	dlqWouldFail     = "would-fail"     // dry run: the input stream does not capture its subject
	dlqReplayed      = "replayed"       // stored by the input stream and removed from the dead-letter stream
	dlqAlreadyStored = "already-stored" // an earlier, interrupted replay had stored it; now removed
	dlqRefused       = "refused"        // truncated, and no --truncated-ok
	dlqFailed        = "failed"         // not replayed, or replayed and not removed (detail says which)
)

// dlqReplayRecord is one dead letter as dlq replay --json prints it.
type dlqReplayRecord struct {
	dlqRecord
	Result    string `json:"result"`
	IngestSeq uint64 `json:"ingest_seq,omitempty"` // its sequence in the input stream, once stored
	Detail    string `json:"detail,omitempty"`

	unanswered bool // the publish got no answer in time
}

// dlqMaxUnanswered is how many publishes in a row may go unanswered before replay stops: each waits for the
// request timeout, and a user who may not publish on the subjects (a permissions violation is never answered) or
// an unavailable input stream would otherwise make every remaining dead letter wait its turn.
const dlqMaxUnanswered = 3

// dlqReplayer replays the selected dead letters into the input stream.
type dlqReplayer struct {
	js          jetstream.JetStream
	r           *dlqReader
	opts        dlqOptions
	inputStream string
	now         time.Time

	input    jetstream.Stream // the input stream, read once
	inputErr error
}

func (rp *dlqReplayer) run(ctx context.Context, stdout, stderr io.Writer) error {
	dlqName := rp.r.st.CachedInfo().Config.Name
	if rp.input, rp.inputErr = rp.js.Stream(ctx, rp.inputStream); rp.inputErr != nil && rp.opts.yes {
		return failErr(fmt.Errorf("dlq replay: input stream %s: %w (check DEDUPE_INPUT_STREAM)", rp.inputStream, rp.inputErr))
	}
	table := newDlqTable(stdout, rp.now, "RESULT")
	var (
		n, more   = 0, false
		tally     = map[string]int{}
		notes     []string // one line per dead letter not replayed (or to be refused)
		notDone   []string // "seq N (why)" for the error line
		stoppedAt error
		silent    = 0 // publishes in a row without an answer
	)
	err := rp.r.scan(ctx, rp.opts.sel, func(dl *deadLetter) (bool, error) {
		if rp.opts.limit > 0 && n == rp.opts.limit {
			more = true
			return false, nil
		}
		n++
		rec := rp.one(ctx, dl)
		tally[rec.Result]++
		if rec.Detail != "" && rec.Result != dlqReplayed {
			notes = append(notes, fmt.Sprintf("seq %d: %s", dl.seq, rec.Detail))
		}
		if rec.Result == dlqRefused || rec.Result == dlqFailed {
			notDone = append(notDone, fmt.Sprintf("seq %d (%s)", dl.seq, rec.Result))
		}
		if rp.opts.asJSON {
			if err := writeJSON(stdout, rec); err != nil {
				return false, err
			}
		} else {
			result := rec.Result
			if rec.IngestSeq > 0 {
				result += fmt.Sprintf(" (%s %d)", rp.inputStream, rec.IngestSeq)
			}
			table.row(dl, result)
		}
		if ctx.Err() != nil {
			stoppedAt = fmt.Errorf("interrupted after dead letter %d: %w", dl.seq, ctx.Err())
			return false, nil
		}
		if rec.unanswered {
			silent++
		} else {
			silent = 0
		}
		if silent == dlqMaxUnanswered {
			stoppedAt = fmt.Errorf("stopped after dead letter %d: %d publishes in a row got no answer (may this user "+
				"publish on the input subjects? is stream %s available?)", dl.seq, silent, rp.inputStream)
			return false, nil
		}
		return true, nil
	})
	if ferr := table.flush(); err == nil {
		err = ferr
	}
	out := stdout
	if rp.opts.asJSON {
		out = stderr // standard output holds only the objects
	}
	for _, l := range notes {
		fmt.Fprintln(out, dlqCell(l, 0))
	}
	fmt.Fprintln(out, rp.summary(dlqName, n, more, tally))
	if err == nil {
		err = stoppedAt
	}
	if err != nil {
		return failErr(fmt.Errorf("dlq replay: %w", err))
	}
	if rp.opts.yes && len(notDone) > 0 {
		shown := notDone[:min(len(notDone), 20)]
		rest := ""
		if len(notDone) > len(shown) {
			rest = fmt.Sprintf(" and %d more", len(notDone)-len(shown))
		}
		return failErr(fmt.Errorf("dlq replay: %d of %d selected dead letters not replayed: %s%s",
			len(notDone), n, strings.Join(shown, ", "), rest))
	}
	return nil
}

func (rp *dlqReplayer) summary(dlqName string, n int, more bool, tally map[string]int) string {
	if n == 0 {
		return "no dead letter matches the selection: nothing to replay"
	}
	var b strings.Builder
	if !rp.opts.yes {
		fmt.Fprintf(&b, "dry run: would replay %d of the %d selected dead letters of %s to stream %s",
			tally[dlqWouldReplay], n, dlqName, rp.inputStream)
	} else {
		done := tally[dlqReplayed] + tally[dlqAlreadyStored]
		fmt.Fprintf(&b, "replayed %d of the %d selected dead letters of %s to stream %s and removed them from %s",
			done, n, dlqName, rp.inputStream, dlqName)
		if k := tally[dlqAlreadyStored]; k > 0 {
			fmt.Fprintf(&b, " (%d already stored by an earlier, interrupted replay)", k)
		}
	}
	for _, r := range []string{dlqRefused, dlqWouldFail, dlqFailed} {
		if k := tally[r]; k > 0 {
			fmt.Fprintf(&b, "; %d %s", k, r)
		}
	}
	if more {
		fmt.Fprintf(&b, "; more dead letters match than --limit %d", rp.opts.limit)
	}
	if !rp.opts.yes {
		b.WriteString(". Nothing was changed: add --yes to replay")
	}
	return b.String()
}

// one replays (or, in a dry run, examines) one dead letter.
func (rp *dlqReplayer) one(ctx context.Context, dl *deadLetter) dlqReplayRecord {
	rec := dlqReplayRecord{dlqRecord: dl.record(rp.now)}
	switch {
	case dl.subject == "":
		rec.Result, rec.Detail = dlqFailed, "no Dedupe-Subject header: not a dead letter the worker wrote; nowhere to replay it"
		return rec
	case dl.truncated != "" && !rp.opts.truncatedOK:
		rec.Result, rec.Detail = dlqRefused, rp.truncatedWhy(ctx, dl)
		return rec
	}
	if !rp.opts.yes {
		rec.Result = dlqWouldReplay
		if dl.reason == pipeline.DeadBadSubject || dl.reason == pipeline.DeadBadTenant || dl.reason == pipeline.DeadBadSource {
			rec.Detail = fmt.Sprintf("%s: replayed to the same subject, it is dead-lettered again unless the worker now "+
				"accepts that subject", dl.reason)
		}
		switch {
		case rp.inputErr != nil:
			rec.Result, rec.Detail = dlqWouldFail, fmt.Sprintf("input stream %s: %v", rp.inputStream, rp.inputErr)
		case !dlqCaptures(rp.input.CachedInfo().Config.Subjects, dl.subject):
			rec.Result, rec.Detail = dlqWouldFail, fmt.Sprintf("stream %s does not capture subject %s (its subjects: %s)",
				rp.inputStream, dl.subject, strings.Join(rp.input.CachedInfo().Config.Subjects, ", "))
		}
		return rec
	}
	msg := &nats.Msg{Subject: dl.subject, Header: dlqReplayHeaders(dl.header), Data: dl.data}
	ack, err := rp.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(rp.inputStream), jetstream.WithMsgID(rp.replayID(dl)))
	if err != nil {
		rec.Result, rec.Detail = dlqFailed, fmt.Sprintf("publish to %s (expecting stream %s): %v; still in %s",
			dl.subject, rp.inputStream, err, rp.r.st.CachedInfo().Config.Name)
		rec.unanswered = errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		return rec
	}
	rec.IngestSeq = ack.Sequence
	if err := rp.r.st.DeleteMsg(ctx, dl.seq); err != nil {
		rec.Result, rec.Detail = dlqFailed, fmt.Sprintf("stored as message %d of %s but not removed from %s: %v; run the "+
			"replay again to remove it (within %s's duplicate window the second publish is collapsed)",
			ack.Sequence, rp.inputStream, rp.r.st.CachedInfo().Config.Name, err, rp.inputStream)
		return rec
	}
	rec.Result = dlqReplayed
	if ack.Duplicate {
		rec.Result = dlqAlreadyStored
		rec.Detail = fmt.Sprintf("an earlier replay had stored it as message %d of %s", ack.Sequence, rp.inputStream)
	}
	return rec
}

// replayID is the Nats-Msg-Id of a dead letter's replay: the dead-letter stream, the sequence, and the time the
// stream stored it (sequences restart when the stream is created again; times do not).
func (rp *dlqReplayer) replayID(dl *deadLetter) string {
	return "replay/" + rp.r.st.CachedInfo().Config.Name + "/" + strconv.FormatUint(dl.seq, 10) + "/" +
		strconv.FormatInt(dl.stored.UnixNano(), 10)
}

// truncatedWhy explains why a truncated dead letter is refused, and whether its original is still in the input
// stream.
func (rp *dlqReplayer) truncatedWhy(ctx context.Context, dl *deadLetter) string {
	s := fmt.Sprintf("truncated: %s. A replay would publish what was kept, not the original envelope", dl.truncated)
	if dl.inputSeq > 0 {
		s += "; " + rp.originalState(ctx, cmp.Or(dl.inputStream, rp.inputStream), dl)
	}
	return s + "; --truncated-ok replays what was kept"
}

// originalState says whether the input stream still holds the original of a dead letter.
func (rp *dlqReplayer) originalState(ctx context.Context, stream string, dl *deadLetter) string {
	st := rp.input
	if stream != rp.inputStream || st == nil {
		var err error
		if st, err = rp.js.Stream(ctx, stream); err != nil {
			return fmt.Sprintf("stream %s, where the original was message %d, could not be read (%v)", stream, dl.inputSeq, err)
		}
	}
	m, err := st.GetMsg(ctx, dl.inputSeq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		what := ""
		if st.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
			what = " (a work-queue stream deletes an envelope once the worker acknowledged it)"
		}
		return fmt.Sprintf("stream %s no longer holds the original, its message %d%s", stream, dl.inputSeq, what)
	case err != nil:
		return fmt.Sprintf("stream %s, where the original was message %d, could not be read (%v)", stream, dl.inputSeq, err)
	case m.Subject != dl.subject || !dlqSameStamp(dl, m):
		return fmt.Sprintf("stream %s holds another envelope as message %d, not the original (the stream was created again)",
			stream, dl.inputSeq)
	default:
		return fmt.Sprintf("stream %s still holds the original as message %d: republish that one instead", stream, dl.inputSeq)
	}
}

// dlqSameStamp compares the envelope identity the dead letter's Nats-Msg-Id records (dlq/<stream>/<seq>/<stamp>)
// with the stored time of m; true when the id records none.
func dlqSameStamp(dl *deadLetter, m *jetstream.RawStreamMsg) bool {
	id := dl.header.Get(jetstream.MsgIDHeader)
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return true
	}
	stamp, err := strconv.ParseInt(id[i+1:], 10, 64)
	return err != nil || stamp == m.Time.UnixNano()
}

// dlqReplayHeaders are the headers a replay publishes: the dead letter's, minus every Dedupe-* header (what the
// worker added) and every Nats-* header (JetStream's: the dead letter's own Nats-Msg-Id, and the metadata of a
// direct get), whatever their letter case. The original's Nats-* headers were already dropped by the worker.
func dlqReplayHeaders(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, vs := range h {
		if dlqHasPrefixFold(k, "dedupe-") || dlqHasPrefixFold(k, "nats-") {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	return out
}

func dlqHasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// dlqCaptures reports whether a stream with these subjects stores subject.
func dlqCaptures(subjects []string, subject string) bool {
	for _, pattern := range subjects {
		if dlqSubjectMatch(pattern, subject) {
			return true
		}
	}
	return false
}

// dlqSubjectMatch matches a subject against a NATS subject pattern ("*" one token, ">" one or more at the end).
func dlqSubjectMatch(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
