package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// dlqReasons are the dead-letter reasons the worker writes: the last token of the dead-letter subject.
var dlqReasons = []string{
	pipeline.DeadBadSubject, pipeline.DeadBadTenant, pipeline.DeadBadSource, pipeline.DeadBadClaim, pipeline.DeadOutputReject,
}

// dlqSeqRange is an inclusive range of dead-letter sequences; hi is math.MaxUint64 for an open range ("N-").
type dlqSeqRange struct{ lo, hi uint64 }

// dlqSeqSet is a sorted list of disjoint, non-adjacent ranges. Empty means every sequence.
type dlqSeqSet []dlqSeqRange

// parseDlqSeqs parses what --seq accepts: "N", "N-M" or "N-", comma separated, in any order and overlapping.
func parseDlqSeqs(s string) (dlqSeqSet, error) {
	var set dlqSeqSet
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := parseDlqSeq(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		to := from
		switch {
		case isRange && hi == "":
			to = math.MaxUint64
		case isRange:
			if to, err = parseDlqSeq(hi); err != nil {
				return nil, fmt.Errorf("%q: %v", part, err)
			}
			if to < from {
				return nil, fmt.Errorf("%q: the range ends before it starts", part)
			}
		}
		set = append(set, dlqSeqRange{from, to})
	}
	return set.merged(), nil
}

func parseDlqSeq(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("a sequence is a whole number from 1, got %q", s)
	}
	return n, nil
}

// merged sorts the ranges and joins those that overlap or touch.
func (s dlqSeqSet) merged() dlqSeqSet {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b dlqSeqRange) int { return cmp.Compare(a.lo, b.lo) })
	var out dlqSeqSet
	for _, r := range s {
		if n := len(out); n > 0 && (out[n-1].hi == math.MaxUint64 || r.lo <= out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s dlqSeqSet) contains(seq uint64) bool {
	if len(s) == 0 {
		return true
	}
	for _, r := range s {
		if seq >= r.lo && seq <= r.hi {
			return true
		}
	}
	return false
}

// dlqSelection is what --reason, --tenant, --source and --seq select; every part narrows it, an empty part
// selects everything.
type dlqSelection struct {
	reasons        []string
	tenant, source string
	seqs           dlqSeqSet
}

// addReasons adds the reasons of one --reason value (a comma list), each of which must be one the worker writes.
func (sel *dlqSelection) addReasons(v string) error {
	for r := range strings.SplitSeq(v, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(dlqReasons, r) {
			return fmt.Errorf("--reason %q: not a dead-letter reason (%s)", r, strings.Join(dlqReasons, ", "))
		}
		if !slices.Contains(sel.reasons, r) {
			sel.reasons = append(sel.reasons, r)
		}
	}
	return nil
}

// filterSubject is the subject filter of the stream reads: one reason is read alone; several, or none, read every
// reason and match here.
func (sel dlqSelection) filterSubject(dlqPrefix string) string {
	if len(sel.reasons) == 1 {
		return dlqPrefix + "." + sel.reasons[0]
	}
	return dlqPrefix + ".>"
}

func (sel dlqSelection) match(dl *deadLetter) bool {
	return (len(sel.reasons) == 0 || slices.Contains(sel.reasons, dl.reason)) &&
		(sel.tenant == "" || sel.tenant == dl.tenant) &&
		(sel.source == "" || sel.source == dl.source) &&
		sel.seqs.contains(dl.seq)
}

// deadLetter is one message of the dead-letter stream, with what the worker wrote about it.
type deadLetter struct {
	seq            uint64
	stored         time.Time // when the dead-letter stream stored it
	reason         string    // the last token of its subject
	subject        string    // Dedupe-Subject: where the envelope was published
	tenant, source string    // from subject, "" when it has no <input prefix>.<tenant>.<source> form
	err            string    // Dedupe-Error
	inputStream    string    // Dedupe-Input-Stream
	inputSeq       uint64    // Dedupe-Input-Seq, 0 when absent
	truncated      string    // Dedupe-Truncated: what was dropped ("" when whole)
	header         nats.Header
	data           []byte
}

// directGetHeaders are the headers a direct get adds to the stored ones; they are not the message's own.
var directGetHeaders = []string{
	jetstream.StreamHeader, jetstream.SequenceHeader, jetstream.TimeStampHeaer, jetstream.SubjectHeader,
	jetstream.LastSequenceHeader, "Nats-Num-Pending",
}

func newDeadLetter(m *jetstream.RawStreamMsg, dlqPrefix, inputPrefix string, direct bool) *deadLetter {
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	if direct {
		for _, name := range directGetHeaders {
			delete(h, name)
		}
	}
	dl := &deadLetter{
		seq: m.Sequence, stored: m.Time, header: h, data: m.Data,
		reason:      strings.TrimPrefix(m.Subject, dlqPrefix+"."),
		subject:     h.Get(pipeline.HeaderSubject),
		err:         h.Get(pipeline.HeaderError),
		inputStream: h.Get(pipeline.HeaderInputStream),
		truncated:   h.Get(pipeline.HeaderTruncated),
	}
	dl.inputSeq, _ = strconv.ParseUint(h.Get(pipeline.HeaderInputSeq), 10, 64)
	if rest, ok := strings.CutPrefix(dl.subject, inputPrefix+"."); ok {
		tokens := strings.SplitN(rest, ".", 3)
		if len(tokens) >= 2 && tokens[0] != "" && tokens[1] != "" {
			dl.tenant, dl.source = tokens[0], tokens[1]
		}
	}
	return dl
}

// dlqReader reads the dead-letter stream by sequence (a message get, or a direct get when the stream allows
// them): no consumer of any kind is created, so reading changes nothing on the server.
type dlqReader struct {
	st                     jetstream.Stream
	last                   uint64 // the stream's last sequence when the reader was opened: nothing after it is read
	dlqPrefix, inputPrefix string
	direct                 bool
}

func openDlqReader(ctx context.Context, js jetstream.JetStream, stream, dlqPrefix, inputPrefix string) (*dlqReader, error) {
	st, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("dlq: stream %s does not exist: check DEDUPE_DLQ_STREAM and DEDUPE_NATS_URL (the worker "+
			"creates it on start with DEDUPE_PROVISION=true)", stream)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: stream %s: %w", stream, err)
	}
	info := st.CachedInfo()
	return &dlqReader{st: st, last: info.State.LastSeq, dlqPrefix: dlqPrefix, inputPrefix: inputPrefix,
		direct: info.Config.AllowDirect}, nil
}

// get reads the dead letter at seq; found is false when there is none.
func (r *dlqReader) get(ctx context.Context, seq uint64) (dl *deadLetter, found bool, err error) {
	m, err := r.st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dlq: read message %d of %s: %w", seq, r.st.CachedInfo().Config.Name, err)
	}
	return newDeadLetter(m, r.dlqPrefix, r.inputPrefix, r.direct), true, nil
}

// scan calls fn for every selected dead letter, in sequence order, up to the stream's last sequence when the
// reader was opened (so that dead letters written meanwhile, a replay's own among them, are not read). Each read
// asks the server for the next message at or after a sequence on the selection's subject: only the ranges of --seq
// are visited. fn returns false to stop.
func (r *dlqReader) scan(ctx context.Context, sel dlqSelection, fn func(*deadLetter) (bool, error)) error {
	ranges := sel.seqs
	if len(ranges) == 0 {
		ranges = dlqSeqSet{{1, math.MaxUint64}}
	}
	filter := sel.filterSubject(r.dlqPrefix)
	cur := uint64(1)
	for i := 0; i < len(ranges); {
		hi := min(ranges[i].hi, r.last)
		cur = max(cur, ranges[i].lo)
		if cur > hi {
			i++
			continue
		}
		m, err := r.st.GetMsg(ctx, cur, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // nothing on the subject at or after cur
		}
		if err != nil {
			return fmt.Errorf("dlq: read %s from message %d: %w", r.st.CachedInfo().Config.Name, cur, err)
		}
		if m.Sequence > hi {
			cur = m.Sequence
			i++
			continue
		}
		cur = m.Sequence + 1
		dl := newDeadLetter(m, r.dlqPrefix, r.inputPrefix, r.direct)
		if !sel.match(dl) {
			continue
		}
		more, err := fn(dl)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// counts returns the number of dead letters per reason, from the stream's subject state.
func (r *dlqReader) counts(ctx context.Context) (map[string]uint64, error) {
	info, err := r.st.Info(ctx, jetstream.WithSubjectFilter(r.dlqPrefix+".>"))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, r.dlqPrefix+".")] += n
	}
	return out, nil
}
