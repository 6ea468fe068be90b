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

// droppedUndelivered is how many envelopes the input stream no longer holds that its consumer never delivered:
// the sequences after the consumer's last delivered one (delivered, its Delivered.Stream) and before the stream's
// first (firstSeq). It is sound only when firstSeq was read before delivered (the latter never goes back, so a
// delivery between the reads cannot pass for a drop) and the consumer is offered every message of the stream
// (seesAll): in a work-queue stream a message is otherwise removed only once acknowledged, after its delivery. A
// consumer created later starts at the stream's first message, so its delivered sequence is never below it. The
// server moves a consumer past what it finds gone at its next delivery, so what drops while the consumer delivers
// may be missed: the count is a lower bound.
func droppedUndelivered(firstSeq, delivered uint64) uint64 {
	if firstSeq > delivered+1 {
		return firstSeq - delivered - 1
	}
	return 0
}

// seesAll reports whether a consumer with filters (none: every subject) is offered every subject the stream
// (subjects) stores.
func seesAll(subjects, filters []string) bool {
	return len(filters) == 0 || !slices.ContainsFunc(subjects, func(s string) bool { return !coveredBy(s, filters) })
}

// inputWatch is what the status polls found of the input stream's limits: the problems last warned about, and the
// last sequence counted as dropped in the stream created at created. Run's first read and the poll may check at once.
type inputWatch struct {
	mu       sync.Mutex
	problems string
	created  time.Time
	through  uint64
}

// checkInputLimits warns, once per change, about the input stream's limits that delete unprocessed envelopes
// (inputLimitProblems; info, the stream as a status poll read it), and while there are any counts and logs the
// envelopes they deleted undelivered (droppedUndelivered, reading the consumer after the stream).
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
		w.created, w.through = info.Created, 0 // created again: its sequences start over
	}
	first := info.State.FirstSeq
	if len(problems) == 0 || first <= w.through+1 {
		return // nothing can be missing that was not counted
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	if err != nil {
		return // the poll reports the consumer itself
	}
	ci := c.CachedInfo()
	filters := ci.Config.FilterSubjects
	if ci.Config.FilterSubject != "" {
		filters = append([]string{ci.Config.FilterSubject}, filters...)
	}
	if !seesAll(info.Config.Subjects, filters) {
		return // another consumer may take the messages the gap holds
	}
	n := droppedUndelivered(first, max(ci.Delivered.Stream, w.through))
	if n == 0 {
		return
	}
	from := max(ci.Delivered.Stream, w.through) + 1
	w.through = first - 1
	p.m.inputDropped.Add(float64(n))
	p.log.Error("pipeline: the input stream deleted envelopes before they were delivered: they are lost, never processed; "+
		"its limits: "+strings.Join(problems, "; "),
		"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "dropped", n, "first_seq", from, "last_seq", first-1)
}
