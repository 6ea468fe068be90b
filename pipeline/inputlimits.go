package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inputLimitProblems says which of the input stream's limits delete envelopes the worker has not processed, after
// the ingest side was told they were stored: an age limit, a count or size limit with discard old, a per-subject
// limit unless discard new applies per subject. (Discard new refuses the publish instead, which the publisher sees.)
func inputLimitProblems(sc jetstream.StreamConfig) []string {
	var out []string
	if sc.MaxAge > 0 {
		out = append(out, fmt.Sprintf("an age limit of %s (MaxAge)", sc.MaxAge))
	}
	if sc.Discard == jetstream.DiscardOld {
		if sc.MaxMsgs > 0 {
			out = append(out, fmt.Sprintf("a limit of %d messages (MaxMsgs) with discard old", sc.MaxMsgs))
		}
		if sc.MaxBytes > 0 {
			out = append(out, fmt.Sprintf("a limit of %d bytes (MaxBytes) with discard old", sc.MaxBytes))
		}
	}
	if sc.MaxMsgsPerSubject > 0 && (sc.Discard != jetstream.DiscardNew || !sc.DiscardNewPerSubject) {
		out = append(out, fmt.Sprintf("a limit of %d messages per subject (MaxMsgsPerSubject) without discard new per subject",
			sc.MaxMsgsPerSubject))
	}
	return out
}

// undeliveredGap is the envelopes the input stream no longer holds that its consumer never delivered: the n
// sequences from from on, after the last the consumer is known to have delivered and before the stream's first
// (first). That last is the highest of its Delivered.Stream read now (delivered), the highest this worker saw
// (high) and the last already counted (through): the delivered sequence goes back on an operator's consumer reset
// or when a new leader restores the one from before a purge, and neither loses what was delivered. It is sound
// only when first was read before delivered and the consumer is offered every message of the stream (seesAll).
// The server moves a consumer past what it finds gone at its next delivery, so the count is a lower bound.
func undeliveredGap(first, delivered, high, through uint64) (from, n uint64) {
	last := max(delivered, high, through)
	if first > last+1 {
		return last + 1, first - last - 1
	}
	return 0, 0
}

// seesAll reports whether a consumer with filters (none: every subject) is offered every subject the stream stores.
func seesAll(subjects, filters []string) bool {
	return len(filters) == 0 || !slices.ContainsFunc(subjects, func(s string) bool { return !coveredBy(s, filters) })
}

// inputWatch is what the status polls found of the input stream's limits and its consumer; Run's first read and
// the poll may check at once.
type inputWatch struct {
	mu              sync.Mutex
	problems        string    // the problems last warned about
	created         time.Time // the stream's creation
	through         uint64    // the last sequence counted as dropped in it
	consumerCreated time.Time // the consumer's creation
	high            uint64    // the highest stream sequence it was seen to deliver
	consumerSeq     uint64    // its last consumer sequence seen
	reset           bool      // that sequence went back since the last check (a reset)
	looked          bool
}

// observeConsumer records what a read of the input consumer (created at created) says it delivered.
func (p *Pipeline) observeConsumer(created time.Time, delivered jetstream.SequenceInfo) {
	w := &p.inputWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.observe(created, delivered)
}

func (w *inputWatch) observe(created time.Time, delivered jetstream.SequenceInfo) {
	if !created.Equal(w.consumerCreated) {
		w.consumerCreated, w.high, w.consumerSeq, w.reset = created, 0, 0, false // a new consumer: it starts over
	}
	if delivered.Consumer < w.consumerSeq {
		w.reset = true // a reset restarts the consumer's own sequence
	}
	w.consumerSeq = delivered.Consumer
	w.high = max(w.high, delivered.Stream)
}

// checkInputLimits warns, once per change, about the input stream's limits that delete unprocessed envelopes
// (info: the stream as a status poll read it), and while there are any counts and logs the undeliveredGap.
func (p *Pipeline) checkInputLimits(ctx context.Context, info *jetstream.StreamInfo) {
	problems := inputLimitProblems(info.Config)
	joined := strings.Join(problems, "; ")
	w := &p.inputWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if joined != w.problems {
		w.problems = joined
		if joined != "" {
			p.log.Warn("pipeline: the input stream deletes envelopes not yet processed: "+joined+"; an outage or a backlog "+
				"longer than that loses envelopes the ingest side was told were stored; remove the limits (nats stream edit), "+
				"or give a count or size limit discard new (the publisher is then refused, and retries)",
				"stream", p.cfg.InputStream)
		} else {
			p.log.Info("pipeline: the input stream no longer deletes envelopes not yet processed", "stream", p.cfg.InputStream)
		}
	}
	if !info.Created.Equal(w.created) {
		w.created, w.through = info.Created, 0 // created again: its sequences start over (and its consumer: observe)
	}
	first := info.State.FirstSeq
	firstLook := !w.looked
	w.looked = true
	if w.reset {
		// An operator reset the consumer: what lies before the stream's first is no loss to count.
		w.reset, w.through = false, max(w.through+1, first, 1)-1 // a new stream's first is 0
	}
	// What the poll read of the consumer before the stream (high) only grows but by a reset: no gap after it, none
	// now, and the second read is spared.
	if len(problems) == 0 || first <= max(w.high, w.through)+1 {
		return // nothing can be missing that was not counted
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	if err != nil {
		return // the poll reports the consumer itself
	}
	ci := c.CachedInfo()
	w.observe(ci.Created, ci.Delivered)
	if w.reset {
		w.reset, w.through = false, max(w.through+1, first, 1)-1
		return
	}
	if !seesAll(info.Config.Subjects, filtersOf(ci.Config)) {
		return // another consumer may take the messages the gap holds
	}
	from, n := undeliveredGap(first, ci.Delivered.Stream, w.high, w.through)
	if n == 0 {
		return
	}
	w.through = first - 1
	if firstLook && ci.NumWaiting > 0 {
		// Found at this worker's first look while other workers pull: they counted it when it opened, and counting
		// it at every restart of a rolling deploy would page again for the same loss.
		p.log.Info(fmt.Sprintf("pipeline: %s no longer holds %d envelopes its consumer never delivered; other workers "+
			"pulling from it were watching and count them", p.cfg.InputStream, n),
			"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "dropped", n, "first_seq", from, "last_seq", first-1,
			"waiting", ci.NumWaiting)
		return
	}
	p.m.inputDropped.Add(float64(n))
	p.log.Error(fmt.Sprintf("pipeline: %s no longer holds %d envelopes its consumer never delivered (its limits, or an "+
		"operator's purge or consumer reset): they are lost, never processed; its limits: %s",
		p.cfg.InputStream, n, joined),
		"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "dropped", n, "first_seq", from, "last_seq", first-1)
}
