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

// inputLimitProblems says which of the input stream's limits (sc, its configuration) delete envelopes the worker
// has not processed: the server enforces them on unprocessed envelopes as on any message, after the ingest side
// was told they were stored. An age limit deletes what waited longer (an outage, a backlog); a count or size limit
// with discard old deletes the oldest to make room, as does a per-subject limit unless discard new applies per
// subject. With discard new the server refuses the publish instead, which the publisher sees: not a problem here.
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
// (first). That last is the highest of its Delivered.Stream as read now (delivered), the highest this worker saw it
// deliver (high) and the last already counted (through): the delivered sequence can go back, when an operator resets
// the consumer (nats consumer reset sets it without regard for the stream's first) or when a consumer's new leader
// restores the one from before a purge (a purge advances it on the leader only), and neither loses what was
// delivered before. It is sound only when first was read before delivered (a delivery between the reads cannot pass
// for a drop) and the consumer is offered every message of the stream (seesAll): in a work-queue stream a message
// is otherwise removed only once acknowledged, after its delivery. A consumer created later starts at the stream's
// first message, so its delivered sequence is never below it. The server moves a consumer past what it finds gone
// at its next delivery, so what drops while the consumer delivers may be missed: the count is a lower bound.
func undeliveredGap(first, delivered, high, through uint64) (from, n uint64) {
	last := max(delivered, high, through)
	if first > last+1 {
		return last + 1, first - last - 1
	}
	return 0, 0
}

// seesAll reports whether a consumer with filters (none: every subject) is offered every subject the stream
// (subjects) stores.
func seesAll(subjects, filters []string) bool {
	return len(filters) == 0 || !slices.ContainsFunc(subjects, func(s string) bool { return !coveredBy(s, filters) })
}

// inputWatch is what the status polls found of the input stream's limits and its consumer: the problems last
// warned about; the last sequence counted as dropped in the stream created at created; the highest stream sequence
// and the last consumer sequence the consumer created at consumerCreated was seen to deliver, and whether that
// consumer sequence went back since the last check (a reset). Run's first read and the poll may check at once.
type inputWatch struct {
	mu              sync.Mutex
	problems        string
	created         time.Time
	through         uint64
	consumerCreated time.Time
	high            uint64
	consumerSeq     uint64
	reset           bool
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
// (inputLimitProblems; info, the stream as a status poll read it), and while there are any counts and logs the
// envelopes INGEST no longer holds that its consumer never delivered (undeliveredGap, reading the consumer after
// the stream; only when what the poll read of the consumer before the stream leaves a gap).
func (p *Pipeline) checkInputLimits(ctx context.Context, info *jetstream.StreamInfo) {
	problems := inputLimitProblems(info.Config)
	w := &p.inputWatch
	w.mu.Lock()
	defer w.mu.Unlock()
	if joined := strings.Join(problems, "; "); joined != w.problems {
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
		// An operator reset the consumer: where it was set to is the operator's choice, and what lies before the
		// stream's first is no loss to count.
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
		// Found at this worker's first look (read before it pulls) while other workers pull: the gap stays at the
		// head of an idle stream until the next delivery, and those workers, watching when it opened, have counted
		// it; counting it at every restart of a rolling deploy would page again for the same loss.
		p.log.Info(fmt.Sprintf("pipeline: %s no longer holds %d envelopes its consumer never delivered; other workers "+
			"pulling from it were watching and count them", p.cfg.InputStream, n),
			"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "dropped", n, "first_seq", from, "last_seq", first-1,
			"waiting", ci.NumWaiting)
		return
	}
	p.m.inputDropped.Add(float64(n))
	p.log.Error(fmt.Sprintf("pipeline: %s no longer holds %d envelopes its consumer never delivered (its limits, or an "+
		"operator's purge or consumer reset): they are lost, never processed; its limits: %s",
		p.cfg.InputStream, n, strings.Join(problems, "; ")),
		"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "dropped", n, "first_seq", from, "last_seq", first-1)
}
