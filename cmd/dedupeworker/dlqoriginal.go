package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// originKind is what the input stream says about a dead letter's original envelope.
type originKind int

const (
	originUnknown    originKind = iota // the dead letter names no input sequence: nothing to check
	originGone                         // the stream no longer holds it (or holds another envelope at its sequence)
	originPending                      // the stream holds it for the worker, which delivers it again
	originKept                         // the stream holds it, processed (a stream that keeps processed envelopes)
	originUnreadable                   // the stream, or its consumer, could not be read
)

// dlqOrigin is the state of a dead letter's original envelope in the input stream.
type dlqOrigin struct {
	kind    originKind
	stream  string
	where   string // "stream INGEST still holds the original as message 7", "… no longer holds …", "… could not be read (…)"
	pending string // for originPending on a stream that keeps processed envelopes: " and consumer C has not acknowledged it (ack floor N)"
}

// original looks the dead letter's original up where the worker read it (Dedupe-Input-Stream, Dedupe-Input-Seq).
// It is the same envelope only with the same sequence, subject and stored time (the time recorded in the dead
// letter's Nats-Msg-Id, dlq/<stream>/<seq>/<stamp>): a stream created again reuses sequences.
func (rp *dlqReplayer) original(ctx context.Context, dl *deadLetter) dlqOrigin {
	if dl.inputSeq == 0 {
		return dlqOrigin{kind: originUnknown}
	}
	stream := cmp.Or(dl.inputStream, rp.inputStream)
	o := dlqOrigin{stream: stream}
	is := func(kind originKind, where string) dlqOrigin {
		o.kind, o.where = kind, where
		return o
	}
	unreadable := func(err error) dlqOrigin {
		return is(originUnreadable, fmt.Sprintf("stream %s, where the original was message %d, could not be read (%v)",
			stream, dl.inputSeq, err))
	}
	st := rp.input
	if stream != rp.inputStream || st == nil {
		var err error
		if st, err = rp.js.Stream(ctx, stream); err != nil {
			return unreadable(err)
		}
	}
	m, err := streamGet(ctx, rp.js, stream, dl.inputSeq, "")
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		what := ""
		if st.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
			what = " (a work-queue stream deletes an envelope once the worker acknowledged it)"
		}
		return is(originGone, fmt.Sprintf("stream %s no longer holds the original, its message %d%s", stream, dl.inputSeq, what))
	case err != nil:
		return unreadable(err)
	case m.Subject != dl.subject || !dlqSameStamp(dl, m):
		return is(originGone, fmt.Sprintf("stream %s holds another envelope as message %d, not the original "+
			"(the stream was created again)", stream, dl.inputSeq))
	}
	o.kind, o.where = originPending, fmt.Sprintf("stream %s still holds the original as message %d", stream, dl.inputSeq)
	if st.CachedInfo().Config.Retention != jetstream.LimitsPolicy {
		return o // work-queue (and interest) streams keep an envelope only until the worker acknowledges it
	}
	// A stream that keeps what was processed: the worker's consumer says whether it is done with the envelope.
	// Acks may land out of order, so an envelope above the ack floor may be done too; replay then waits for the
	// floor to pass it.
	c, err := rp.js.Consumer(ctx, stream, rp.consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		o.kind = originKept
		o.where += fmt.Sprintf(" (the stream keeps processed envelopes; consumer %s does not exist)", rp.consumer)
	case err != nil:
		return unreadable(fmt.Errorf("consumer %s: %w", rp.consumer, err))
	case dl.inputSeq <= c.CachedInfo().AckFloor.Stream:
		o.kind = originKept
		o.where += fmt.Sprintf(" (the stream keeps processed envelopes; consumer %s acknowledged it)", rp.consumer)
	default:
		o.pending = fmt.Sprintf(" and consumer %s has not acknowledged it (ack floor %d)", rp.consumer,
			c.CachedInfo().AckFloor.Stream)
	}
	return o
}

// truncatedWhy explains why a truncated dead letter is refused, and whether its original is still in the input
// stream.
func (rp *dlqReplayer) truncatedWhy(ctx context.Context, dl *deadLetter) string {
	s := fmt.Sprintf("truncated: %s. A replay would publish what was kept, not the original envelope", dl.truncated)
	switch o := rp.original(ctx, dl); o.kind {
	case originPending:
		s += "; " + o.where + o.pending + ": the worker delivers it again itself"
	case originKept:
		s += "; " + o.where + ": republish that one instead"
	case originGone, originUnreadable:
		s += "; " + o.where
	}
	return s + "; --truncated-ok replays what was kept"
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
