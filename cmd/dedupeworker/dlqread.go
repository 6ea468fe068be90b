package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
)

// deadLetter is one message of the dead-letter stream, with what the worker wrote about it.
type deadLetter struct {
	seq            uint64
	stored         time.Time // when the dead-letter stream stored it
	reason         string    // dlqReason of its subject
	subject        string    // Dedupe-Subject: where the envelope was published
	tenant, source string    // from subject, "" when it has no <input prefix>.<tenant>.<source> form
	err            string    // Dedupe-Error
	inputStream    string    // Dedupe-Input-Stream
	inputSeq       uint64    // Dedupe-Input-Seq, 0 when absent
	truncated      string    // Dedupe-Truncated: what was dropped ("" when whole)
	header         nats.Header
	data           []byte
}

func newDeadLetter(m *jetstream.RawStreamMsg, dlqPrefix, inputPrefix string) *deadLetter {
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	dl := &deadLetter{
		seq: m.Sequence, stored: m.Time, header: h, data: m.Data,
		reason:      dlqReason(dlqPrefix, m.Subject),
		subject:     h.Get(contract.HeaderSubject),
		err:         h.Get(contract.HeaderError),
		inputStream: h.Get(contract.HeaderInputStream),
		truncated:   h.Get(contract.HeaderTruncated),
	}
	dl.inputSeq, _ = strconv.ParseUint(h.Get(contract.HeaderInputSeq), 10, 64)
	// A bad-tenant or bad-source dead letter still names its tenant and source: --tenant and --source select it.
	if in, _ := contract.ParseInput(inputPrefix, dl.subject); in.Tenant != "" && in.Source != "" {
		dl.tenant, dl.source = in.Tenant, in.Source
	}
	return dl
}

// dlqReason is the reason of a dead letter on subject: what follows dlqPrefix, or the whole subject when it is
// not under dlqPrefix.
func dlqReason(dlqPrefix, subject string) string {
	if reason, ok := contract.ParseDeadLetter(dlqPrefix, subject); ok {
		return reason
	}
	return subject
}

// dlqReader reads the dead-letter stream by sequence, through the stream's message-get API (streamGet, never a
// direct get): no consumer of any kind is created, so reading changes nothing on the server, and no stored
// header is taken for a server status.
type dlqReader struct {
	js                     jetstream.JetStream
	st                     jetstream.Stream
	name                   string
	last                   uint64 // the stream's last sequence when the reader was opened: nothing after it is read
	dlqPrefix, inputPrefix string

	del func(ctx context.Context, seq uint64) error // removes a message of the stream: its DeleteMsg
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
	return &dlqReader{js: js, st: st, name: info.Config.Name, last: info.State.LastSeq, dlqPrefix: dlqPrefix,
		inputPrefix: inputPrefix, del: st.DeleteMsg}, nil
}

func (r *dlqReader) get(ctx context.Context, seq uint64) (dl *deadLetter, found bool, err error) {
	m, err := streamGet(ctx, r.js, r.name, seq, "")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dlq: %w", err)
	}
	return newDeadLetter(m, r.dlqPrefix, r.inputPrefix), true, nil
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
		m, err := streamGet(ctx, r.js, r.name, cur, filter)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // nothing on the subject at or after cur
		}
		if err != nil {
			return fmt.Errorf("dlq: read %s from message %d: %w", r.name, cur, err)
		}
		if m.Sequence > hi {
			cur = m.Sequence
			i++
			continue
		}
		cur = m.Sequence + 1
		dl := newDeadLetter(m, r.dlqPrefix, r.inputPrefix)
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

// scanLimited is scan of o's selection for at most o.limit dead letters (0: all), writing to w what fn returns
// for each: rec with --json, else a row of the table (cell in its column extra, when it has one). n were passed to
// fn, and next is the sequence of the first one past the limit (0: none was); fn returns more false to stop.
func (r *dlqReader) scanLimited(ctx context.Context, o dlqOptions, w io.Writer, now time.Time, extra string,
	fn func(*deadLetter) (rec any, cell string, more bool)) (n int, next uint64, err error) {
	table := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	err = r.scan(ctx, o.sel, func(dl *deadLetter) (bool, error) {
		if o.limit > 0 && n == o.limit {
			next = dl.seq
			return false, nil
		}
		n++
		rec, cell, more := fn(dl)
		if o.asJSON {
			return more, writeJSON(w, rec)
		}
		dlqRow(table, dl, now, n == 1, extra, cell)
		return more, nil
	})
	if ferr := table.Flush(); err == nil {
		err = ferr
	}
	return n, next, err
}

// counts returns the number of dead letters per reason, from the stream's subject state.
func (r *dlqReader) counts(ctx context.Context) (map[string]uint64, error) {
	info, err := r.st.Info(ctx, jetstream.WithSubjectFilter(contract.All(r.dlqPrefix)))
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		out[dlqReason(r.dlqPrefix, subj)] += n
	}
	return out, nil
}

// streamGet reads one message of a stream through the stream's API ($JS.API.STREAM.MSG.GET): the message at seq
// or, with nextBySubject, the first at or after seq on that subject; jetstream.ErrMsgNotFound when there is none.
//
// Never by direct get, even on a stream that allows them: a direct get answers with the stored headers as the
// reply's own, so a stored message with an empty body and a Status header — a control-header dead letter written
// before the worker renamed those headers, or its original in the input stream — reads as the server's status:
// nats.go takes "Status: 404" for "no message" (a scan would stop there and hide every later dead letter), 503 for
// "no responders" and anything else for an error. The API's JSON answer carries the headers encoded, as data.
func streamGet(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, nextBySubject string) (*jetstream.RawStreamMsg, error) {
	req, _ := json.Marshal(struct { // a number and a string: never fails
		Seq        uint64 `json:"seq"`
		NextBySubj string `json:"next_by_subj,omitempty"`
	}{seq, nextBySubject})
	ctx, cancel := context.WithTimeout(ctx, dlqRequestTimeout)
	defer cancel()
	reply, err := js.Conn().RequestWithContext(ctx, jsapi.Prefix(js.Options())+"STREAM.MSG.GET."+stream, req)
	if err == nil {
		m, perr := natsreq.ParseStoredMsg(reply.Data)
		if perr == nil || perr == jetstream.ErrMsgNotFound { // the latter returned itself
			return m, perr
		}
		err = perr
	}
	return nil, fmt.Errorf("get message %d of stream %s: %w", seq, stream, err)
}
