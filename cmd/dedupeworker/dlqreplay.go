package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// Results of replaying one dead letter.
const (
	dlqWouldReplay   = "would-replay"   // dry run: it would be replayed
	dlqWouldFail     = "would-fail"     // dry run: the input stream does not capture its subject
	dlqReplayed      = "replayed"       // stored by the input stream and removed from the dead-letter stream
	dlqAlreadyStored = "already-stored" // stored before (an earlier replay, or another dead letter of the envelope); now removed
	dlqRefused       = "refused"        // truncated, original still in the input, or can only fail again (detail says which)
	dlqFailed        = "failed"         // not replayed: not published, or refused by the server
	dlqUnconfirmed   = "unconfirmed"    // published without an answer (none in time, interrupted): may be stored
	dlqNotRemoved    = "not-removed"    // stored by the input stream, not removed from the dead-letter stream
)

// dlqReplayRecord is one dead letter as dlq replay and dlq rm --json print it: the dead letter and what became of it.
type dlqReplayRecord struct {
	dlqRecord
	Result    string `json:"result"`
	IngestSeq uint64 `json:"ingest_seq,omitempty"` // its sequence in the input stream, once stored
	Detail    string `json:"detail,omitempty"`

	unanswered bool // the publish got no answer: none in time, or no stream to give one (jserr.Unanswered)
	gone       bool // replayed, and found gone from the dead-letter stream after a removal it did not confirm
}

// dlqMaxUnanswered is how many publishes in a row may go unanswered before replay stops: a user who may not
// publish on the subjects (a permissions violation is never answered: each waits for the request timeout), or an
// input stream gone or unavailable (no stream answers), would otherwise fail every remaining dead letter in turn.
const dlqMaxUnanswered = 3

// dlqReplayer replays the selected dead letters into the input stream.
type dlqReplayer struct {
	js          jetstream.JetStream
	r           *dlqReader
	opts        dlqOptions
	inputStream string
	consumer    string // the worker's consumer on the input stream (DEDUPE_CONSUMER)
	now         time.Time

	input    jetstream.Stream // the input stream, read once
	inputErr error
}

func (rp *dlqReplayer) run(ctx context.Context, stdout, stderr io.Writer) error {
	if rp.input, rp.inputErr = rp.js.Stream(ctx, rp.inputStream); rp.inputErr != nil && rp.opts.yes {
		return failErr(fmt.Errorf("dlq replay: input stream %s: %w (check DEDUPE_INPUT_STREAM)", rp.inputStream, rp.inputErr))
	}
	var (
		tally      = map[string]int{}
		notes      []string // one line per dead letter not replayed (or to be refused)
		notDone    []string // "seq N (why)" for the error line
		notRemoved []string // the sequences stored in the input stream, still in the dead-letter stream
		stoppedAt  error
		silent     = 0 // publishes in a row without an answer
	)
	n, next, err := rp.r.scanLimited(ctx, rp.opts, stdout, rp.now, "RESULT", func(dl *deadLetter) (any, string, bool) {
		rec := rp.one(ctx, dl)
		tally[rec.Result]++
		if rec.Detail != "" && (rec.Result != dlqReplayed || rec.gone) {
			notes = append(notes, fmt.Sprintf("seq %d: %s", dl.seq, rec.Detail))
		}
		switch rec.Result {
		case dlqNotRemoved:
			notRemoved = append(notRemoved, strconv.FormatUint(dl.seq, 10))
			fallthrough
		case dlqRefused, dlqFailed, dlqUnconfirmed:
			notDone = append(notDone, fmt.Sprintf("seq %d (%s)", dl.seq, rec.Result))
		}
		result := rec.Result
		if rec.IngestSeq > 0 {
			result += fmt.Sprintf(" (%s %d)", rp.inputStream, rec.IngestSeq)
		}
		if rec.unanswered {
			silent++
		} else {
			silent = 0
		}
		switch {
		case ctx.Err() != nil:
			stoppedAt = fmt.Errorf("interrupted after dead letter %d: %w", dl.seq, ctx.Err())
		case silent == dlqMaxUnanswered:
			stoppedAt = fmt.Errorf("stopped after dead letter %d: %d publishes in a row got no answer (may this user "+
				"publish on the input subjects? is stream %s available?)", dl.seq, silent, rp.inputStream)
		}
		return rec, result, stoppedAt == nil
	})
	out := rp.opts.notes(stdout, stderr)
	for _, l := range notes {
		fmt.Fprintln(out, dlqCell(l, 0))
	}
	fmt.Fprintln(out, rp.summary(n, next > 0, tally, notRemoved))
	if err == nil {
		err = stoppedAt
	}
	if err != nil {
		return failErr(fmt.Errorf("dlq replay: %w", err))
	}
	if rp.opts.yes && len(notDone) > 0 {
		return failErr(fmt.Errorf("dlq replay: %d of %d selected dead letters not replayed: %s", len(notDone), n,
			dlqListed(notDone)))
	}
	return nil
}

func (rp *dlqReplayer) summary(n int, more bool, tally map[string]int, notRemoved []string) string {
	dlqName := rp.r.name
	if n == 0 {
		return "no dead letter matches the selection: nothing to replay"
	}
	var b strings.Builder
	if !rp.opts.yes {
		fmt.Fprintf(&b, "dry run: would replay %d of the %d selected dead letters of %s to stream %s",
			tally[dlqWouldReplay], n, dlqName, rp.inputStream)
	} else {
		switch done := tally[dlqReplayed] + tally[dlqAlreadyStored]; {
		case done == 0 && tally[dlqNotRemoved]+tally[dlqUnconfirmed] == 0:
			fmt.Fprintf(&b, "replayed none of the %d selected dead letters of %s: nothing was removed", n, dlqName)
		case done == 0: // some may be, or are, stored: not "none replayed"
			fmt.Fprintf(&b, "removed none of the %d selected dead letters from %s", n, dlqName)
		default:
			fmt.Fprintf(&b, "replayed %d of the %d selected dead letters of %s to stream %s and removed %s from %s",
				done, n, dlqName, rp.inputStream, plural(uint64(done), "it", "them"), dlqName)
		}
		if k := tally[dlqAlreadyStored]; k > 0 {
			fmt.Fprintf(&b, " (%d already stored, by an earlier replay or from another dead letter of the same envelope)", k)
		}
	}
	for _, r := range []string{dlqRefused, dlqWouldFail, dlqFailed} {
		if k := tally[r]; k > 0 {
			fmt.Fprintf(&b, "; %d %s", k, r)
		}
	}
	if k := tally[dlqNotRemoved]; k > 0 {
		seqs, left := dlqFirst(notRemoved, ",")
		rest := ""
		if left > 0 {
			rest = fmt.Sprintf(" (and %d more, listed above)", left)
		}
		fmt.Fprintf(&b, "; %d %s (stored in %s: remove with dedupeworker dlq rm --seq %s --yes%s, not with another "+
			"replay)", k, dlqNotRemoved, rp.inputStream, seqs, rest)
	}
	if k := tally[dlqUnconfirmed]; k > 0 {
		within := rp.inputStream + "'s duplicate window"
		if w := rp.windowText(""); w != "" {
			within = w + ", " + within
		}
		fmt.Fprintf(&b, "; %d %s (may be stored: run the replay again within %s)", k, dlqUnconfirmed, within)
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
	done := func(result, detail string) dlqReplayRecord {
		rec.Result, rec.Detail = result, detail
		return rec
	}
	failed := dlqFailed // what a dead letter that cannot be replayed gets
	if !rp.opts.yes {
		failed = dlqWouldFail
	}
	switch {
	case dl.subject == "":
		return done(dlqFailed, "no Dedupe-Subject header: not a dead letter the worker wrote; nowhere to replay it")
	case dl.truncated != "" && !rp.opts.truncatedOK:
		return done(dlqRefused, rp.truncatedWhy(ctx, dl))
	}
	// The original first: while the input stream still holds it for the worker, the worker delivers it again
	// itself, and a replay beside it is a second copy (an event without a key, named by its input sequence, is
	// published twice). No flag overrides that.
	switch orig := rp.original(ctx, dl); orig.kind {
	case originPending:
		return done(dlqRefused, orig.where+orig.pending+": the worker delivers it again itself: a replay "+
			"would process the envelope twice (an event without a key would be published twice). Wait until the worker "+
			"has processed it (it leaves "+orig.stream+"; a new dead letter is written if it fails again), or remove it "+
			"from "+orig.stream+" first")
	case originUnreadable:
		return done(failed, "could not check whether the original is still in the input: "+orig.where)
	}
	if why := rp.failsAgain(dl); why != "" {
		if !rp.opts.force {
			return done(dlqRefused, why+"; --force replays it anyway"+byHand(dl))
		}
		rec.Detail = why
	}
	// With --yes the input stream was read (run stops otherwise). A subject it does not capture is not published:
	// no stream would answer it, and a publish without an answer counts toward stopping the replay.
	switch {
	case rp.inputErr != nil:
		return done(dlqWouldFail, fmt.Sprintf("input stream %s: %v", rp.inputStream, rp.inputErr))
	case !dlqCaptures(rp.input.CachedInfo().Config.Subjects, dl.subject):
		return done(failed, fmt.Sprintf("stream %s does not capture subject %s (its subjects: %s)",
			rp.inputStream, dl.subject, strings.Join(rp.input.CachedInfo().Config.Subjects, ", ")))
	case !rp.opts.yes:
		rec.Result = dlqWouldReplay // its detail, if any, says why --force was needed
		return rec
	}
	if ctx.Err() != nil { // interrupted before the publish: nothing sent
		return done(dlqFailed, fmt.Sprintf("not published: %v; still in %s", ctx.Err(), rp.r.name))
	}
	msg := &nats.Msg{Subject: dl.subject, Header: dlqReplayHeaders(dl.header), Data: dl.data}
	ack, err := rp.js.PublishMsg(ctx, msg, jetstream.WithExpectStream(rp.inputStream), jetstream.WithMsgID(rp.replayID(dl)))
	if err != nil {
		rec.unanswered = jserr.Unanswered(err)
		if jserr.MayHaveLanded(err) { // sent, no answer: it may be stored
			return done(dlqUnconfirmed, fmt.Sprintf("no answer to the publish to %s (expecting stream %s): %v: it may "+
				"be stored; %s; still in %s", dl.subject, rp.inputStream, err, rp.rerunAdvice(), rp.r.name))
		}
		return done(dlqFailed, fmt.Sprintf("publish to %s (expecting stream %s): %v; still in %s",
			dl.subject, rp.inputStream, err, rp.r.name))
	}
	rec.IngestSeq = ack.Sequence
	// Stored: the removal is not left to an interruption. Cancelled with the replay, it would fail at once and
	// leave a dead letter whose envelope the input stream holds; a rerun after the input's duplicate window would
	// store it a second time.
	how, err := rp.r.remove(ctx, dl.seq)
	if err != nil {
		return done(dlqNotRemoved, fmt.Sprintf("stored as message %d of %s but not removed from %s: %v; remove it "+
			"with dedupeworker dlq rm --seq %d --yes, not with another replay (after %s's duplicate window%s a replay "+
			"stores it again)", ack.Sequence, rp.inputStream, rp.r.name, err, dl.seq, rp.inputStream, rp.windowText(" of ")))
	}
	result, detail := dlqReplayed, rec.Detail
	if ack.Duplicate {
		result, detail = dlqAlreadyStored, fmt.Sprintf("already stored as message %d of %s, by an earlier replay or "+
			"from another dead letter of the same envelope", ack.Sequence, rp.inputStream)
	}
	// Not a failure: the dead letter is gone, its envelope stored, as a replay leaves them.
	switch how {
	case dlqRemovedMeanwhile:
		rec.gone = true
		detail = strings.TrimPrefix(detail+"; removed from "+rp.r.name+" meanwhile ("+dlqRemovedMeanwhileText+")", "; ")
	case dlqRemovedUnconfirmed:
		rec.gone = true
		detail = strings.TrimPrefix(detail+"; removal from "+rp.r.name+" unanswered; "+dlqUnconfirmedText, "; ")
	}
	return done(result, detail)
}

// windowText is prefix and the input stream's duplicate window (" of 2m"), or "" when it is unknown (the input
// stream was not read). Within the window, a second publish with the same Nats-Msg-Id is collapsed into the first.
func (rp *dlqReplayer) windowText(prefix string) string {
	if rp.input == nil || rp.input.CachedInfo().Config.Duplicates <= 0 {
		return ""
	}
	return prefix + dlqDuration(rp.input.CachedInfo().Config.Duplicates)
}

// rerunAdvice says how long running the replay again is safe for a dead letter that may be stored.
func (rp *dlqReplayer) rerunAdvice() string {
	within := rp.inputStream + "'s duplicate window"
	if w := rp.windowText(""); w != "" {
		within = w + " (" + within + ")"
	}
	return "run the replay again within " + within + " and it is not stored twice"
}

// dlqFirst joins the first 20 of items with sep, and says how many it left out: the lists of a closing line.
func dlqFirst(items []string, sep string) (joined string, left int) {
	return strings.Join(items[:min(len(items), 20)], sep), max(0, len(items)-20)
}

// dlqListed is the list of an error: the first 20 of items, and how many more there are.
func dlqListed(items []string) string {
	s, left := dlqFirst(items, ", ")
	if left > 0 {
		s += fmt.Sprintf(" and %d more", left)
	}
	return s
}

// dlqDuration prints a duration as people write a stream's duplicate window: 2m, 90s, 1h30m, 250ms.
func dlqDuration(d time.Duration) string {
	s := d.String()
	if d%time.Minute == 0 {
		s = strings.TrimSuffix(s, "0s")
	}
	if d%time.Hour == 0 {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// failsAgain says why a replay of dl can only be dead-lettered again, or "".
func (rp *dlqReplayer) failsAgain(dl *deadLetter) string {
	if !slices.Contains(dlqFailsAgain, dl.reason) {
		return ""
	}
	if dl.reason == contract.DeadControlHeader {
		// Older dead letters may hold the Status and Description headers as they came, not renamed.
		status := cmp.Or(dl.header.Get(contract.HeaderOriginalStatus), dl.header.Get(contract.NATSStatus))
		if desc := cmp.Or(dl.header.Get(contract.HeaderOriginalDescription), dl.header.Get(contract.NATSDescription)); desc != "" {
			status += " " + desc
		}
		return fmt.Sprintf("%s: an empty body with a Status header (%s), which nats.go consumers take for a server "+
			"status message: replayed as it was, the worker dead-letters it again. To have it processed, publish its "+
			"body and its other headers yourself (dlq show %d --json shows them)", dl.reason, status, dl.seq)
	}
	return fmt.Sprintf("%s: the worker refuses its subject %s, so a replay is dead-lettered again unless the worker "+
		"now accepts it (a source or tenant rule changed)", dl.reason, dl.subject)
}

// byHand is the way out of a refusal for a dead letter whose subject the worker refuses: --force only helps once
// the worker accepts that subject, and the usual fix is the subject itself (OPERATIONS.md, DedupeworkerDeadLetters).
// A control-header letter's reason says its own.
func byHand(dl *deadLetter) string {
	if dl.reason == contract.DeadControlHeader {
		return ""
	}
	return fmt.Sprintf(", or publish it to the right subject yourself (its body: dlq show %d --body; its headers: "+
		"dlq show %d) and remove it: dlq rm %d --yes", dl.seq, dl.seq, dl.seq)
}

// replayID is the Nats-Msg-Id of a dead letter's replay: "replay/" and the dead letter's own Nats-Msg-Id, the
// envelope's identity (dlq/<input stream>/<seq>/<stored at>). One envelope dead-lettered twice (the worker stopped
// between the dead letter and the input ack, and the redelivery came after the dead-letter stream's duplicate
// window) is two dead letters with one identity: their replays collapse in the input stream. A dead letter without
// a Nats-Msg-Id of that form (none, or one given by hand) is named by where the dead-letter stream holds it: the
// stream, the sequence, and the time the stream stored it (sequences restart when the stream is created again;
// times do not). The identity is followed by a digest of what the replay publishes (subject and body): a letter
// published by hand with another letter's Nats-Msg-Id and an edited body is another replay, stored, never
// collapsed into the first and then removed as "already stored".
func (rp *dlqReplayer) replayID(dl *deadLetter) string {
	if id := dl.header.Get(contract.HeaderMsgID); dlqWorkerID(id) {
		return contract.ReplayIDPrefix + id + "/" + dlqContentTag(dl.subject, dl.data)
	}
	return contract.ReplayIDPrefix + rp.r.name + "/" + strconv.FormatUint(dl.seq, 10) + "/" +
		strconv.FormatInt(dl.stored.UnixNano(), 10)
}

// dlqContentTag is a short digest of a replay's subject and body: 16 bytes of SHA-256, in hex.
func dlqContentTag(subject string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{0}) // no subject holds a NUL: subject and body cannot trade bytes
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// dlqWorkerID reports whether id has the form of the Nats-Msg-Id the worker gives a dead letter:
// dlq/<input stream>/<digits>/<digits> (a stream name holds no "/").
func dlqWorkerID(id string) bool {
	rest, ok := strings.CutPrefix(id, contract.DeadLetterIDPrefix)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// dlqReplayHeaders are the headers a replay publishes: the dead letter's, minus every Dedupe-* header (what the
// worker added; Dedupe-Original-Status and -Description go back to Status and Description) and every Nats-*
// header (JetStream's: the dead letter's own Nats-Msg-Id), whatever their letter case. The original's Nats-*
// headers were already dropped by the worker.
func dlqReplayHeaders(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, vs := range h {
		if contract.Reserved(k) {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	// The headers of a control-header envelope are renamed in its dead letter (a dead letter with them is poison
	// to nats.go consumers too): the replay publishes them as they came.
	for orig, name := range map[string]string{contract.NATSStatus: contract.HeaderOriginalStatus,
		contract.NATSDescription: contract.HeaderOriginalDescription} {
		if vs := h.Values(name); len(vs) > 0 {
			out[orig] = slices.Clone(vs)
		}
	}
	return out
}

// dlqCaptures reports whether a stream with these subjects stores subject.
func dlqCaptures(subjects []string, subject string) bool {
	return slices.ContainsFunc(subjects, func(filter string) bool { return server.SubjectMatchesFilter(subject, filter) })
}
