package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// copies counts, beside the window, the copies each claim suppressed (Config.CopiesStream): one increment per copy
// acknowledged as a duplicate, never waited for. A count that fails is lost; it never changes an envelope's fate.
type copies struct {
	c       atomic.Pointer[kvwindow.CopyCounter] // nil: not counting
	log     *slog.Logger
	stream  string
	failing atomic.Bool // the last answer was a failure, which was logged: the next failures are not, until one succeeds
	// proven says the last answer was a success. Until then one increment is sent and the copies counted
	// meanwhile wait for its answer (waiting): a refused increment overwrites the connection's last error, where
	// an ack's refusal is read (ackRefusal), and one increment overwrites it once rather than once per copy.
	proven  atomic.Bool
	mu      sync.Mutex
	probe   bool        // an increment awaits the answer that shows whether counting works
	waiting []copyCount // the copies counted while it does (at most copiesMaxPending)
	// hold is the longest a delivery may have been held to be counted: half the counter stream's duplicate window
	// (countable).
	hold time.Duration
	// retryAt is the p.clock() before which, while failing, no copy is counted: one increment per copiesRetry
	// finds out whether counting works again, instead of one per duplicate.
	retryAt atomic.Int64
}

// copiesRetry is how often a failing count is tried again.
const copiesRetry = 10 * time.Second

// copiesMaxPending bounds the increments awaiting the server's answer; beyond it copies go uncounted.
const copiesMaxPending = 4096

// startCopies starts counting copies when Config.CopiesStream names a stream, after provisioning, and returns the
// function that ends the count.
func (p *Pipeline) startCopies(ctx context.Context) func() {
	if p.cfg.CopiesStream == "" {
		return func() {}
	}
	p.copies.log, p.copies.stream = p.log, p.cfg.CopiesStream
	// A previous Run's counter was closed with its answers still to come, and they never will.
	p.copies.mu.Lock()
	p.copies.probe, p.copies.waiting = false, nil
	p.copies.proven.Store(false)
	p.copies.mu.Unlock()
	p.copies.hold = copiesDuplicates(p.cfg) / 2
	lctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	s, err := p.js.Stream(lctx, p.cfg.CopiesStream)
	cancel()
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		p.copies.answer(fmt.Errorf("stream %s does not exist: %w", p.cfg.CopiesStream, kvwindow.ErrNoCopies))
	case err != nil:
		// Without the stream's own duplicate window, two deliveries of one copy could both be counted.
		p.log.Warn("pipeline: not counting the copies claims suppress: counter stream not read (restart the worker to "+
			"count again); deduplication goes on", "stream", p.cfg.CopiesStream, "err", err)
		return func() {}
	case !s.CachedInfo().Config.AllowMsgCounter:
		p.log.Warn("pipeline: not counting the copies claims suppress: the stream is not a counter stream (nats-server "+
			"2.12 or later; nats stream rm it and restart a worker to create it); deduplication goes on", "stream", p.cfg.CopiesStream)
		return func() {}
	case s.CachedInfo().Config.Duplicates > 0:
		p.copies.hold = s.CachedInfo().Config.Duplicates / 2
	}
	c, err := kvwindow.NewCopyCounter(p.nc, kvwindow.CopyCounterConfig{Stream: p.cfg.CopiesStream, Timeout: p.cfg.PublishTimeout,
		MaxPending: copiesMaxPending, Report: p.copies.answer})
	if err != nil {
		p.log.Warn("pipeline: not counting the copies claims suppress", "stream", p.cfg.CopiesStream, "err", err)
		return func() {}
	}
	p.copies.c.Store(c)
	return func() {
		p.copies.c.Store(nil)
		c.Close()
	}
}

// answer takes the server's answer to one increment, logging each change of state once. A success sends the copies
// waiting for it; a failure leaves them uncounted.
func (c *copies) answer(err error) {
	c.mu.Lock()
	c.probe = false
	c.proven.Store(err == nil)
	waiting := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	if err == nil {
		// Sent at most the probe's round trip after their acks, well within the counter stream's duplicate window.
		for _, cc := range waiting {
			c.send(cc)
		}
		if c.failing.Load() && c.failing.CompareAndSwap(true, false) {
			c.log.Info("pipeline: counting the copies claims suppress again", "stream", c.stream)
		}
		return
	}
	if c.failing.CompareAndSwap(false, true) {
		msg := "pipeline: copies a claim suppressed are not counted (dedupeworker window get shows them as unknown or too few); deduplication goes on"
		if errors.Is(err, kvwindow.ErrNoCopies) {
			msg = "pipeline: counter stream missing: copies a claim suppressed are not counted until it exists " +
				"(a worker started with DEDUPE_PROVISION=true creates it); deduplication goes on"
		}
		c.log.Warn(msg, "stream", c.stream, "err", err)
		return
	}
	c.log.Debug("pipeline: copy not counted", "stream", c.stream, "err", err)
}

func (s *step) countCopy(count protocol.Count, ack protocol.AckResult) {
	p, e := s.w.p, &s.w.e
	c := p.copies.c.Load()
	if c == nil || !countable(count, ack, s.res.HolderSeq, p.hold(e.received), p.copies.hold) {
		return
	}
	if p.copies.failing.Load() {
		now, at := int64(p.clock()), p.copies.retryAt.Load()
		if now < at || !p.copies.retryAt.CompareAndSwap(at, now+int64(copiesRetry)) {
			return
		}
	}
	cc := copyCount{tenant: e.tenant, source: e.source, key: e.key,
		holder: kvwindow.Claimant{Seq: s.res.HolderSeq, Stamp: s.res.HolderStamp},
		copy:   kvwindow.Claimant{Seq: e.seq, Stamp: e.stamp}}
	if !p.copies.proven.Load() && p.copies.wait(cc) {
		return
	}
	p.copies.send(cc)
}

// copyCount is one copy to count: the envelope copy of the event whose claim on (tenant, source, key) holder holds.
type copyCount struct {
	tenant, source, key string
	holder, copy        kvwindow.Claimant
}

// wait keeps cc waiting while an increment awaits the answer that shows whether counting works, and reports
// whether it did; when none awaits one, cc is to be that increment (false).
func (c *copies) wait(cc copyCount) (waits bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.proven.Load():
		return false
	case !c.probe:
		c.probe = true
		return false
	case len(c.waiting) < copiesMaxPending:
		c.waiting = append(c.waiting, cc)
	default:
		c.log.Debug("pipeline: copy not counted: too many counts awaiting their answer", "stream", c.stream)
	}
	return true
}

// send sends the increment of cc without waiting; its answer goes to answer.
func (c *copies) send(cc copyCount) {
	counter := c.c.Load()
	if counter == nil {
		return
	}
	err := counter.Add(cc.tenant, cc.source, cc.key, cc.holder, cc.copy)
	switch {
	case errors.Is(err, kvwindow.ErrCopiesBusy):
		// Back-pressure, not a failure of the count: this copy goes uncounted, the next ones are tried.
		c.log.Debug("pipeline: copy not counted: too many counts awaiting their answer", "stream", c.stream)
		c.mu.Lock()
		c.probe = c.probe && c.proven.Load() // not sent: no answer will come (the probe, if it was one)
		c.mu.Unlock()
	case err != nil:
		c.answer(err)
	}
}

// countable reports whether a delivery is a copy to count: acknowledged as a duplicate with the server's
// confirmation (else a redelivery may follow, and be counted then), of a claim whose holder is known, and held
// neither through a pause nor past the hold bound or hold. A second delivery of a copy is received before the
// first is acknowledged, so two deliveries both counted are counted within hold of each other, inside the counter
// stream's duplicate window, and the stream keeps one (their Nats-Msg-Id is the copy's envelope).
func countable(count protocol.Count, ack protocol.AckResult, holderSeq uint64, h protocol.Hold, hold time.Duration) bool {
	h.Bound = min(h.Bound, hold)
	return count == protocol.CountDuplicate && ack == protocol.AckConfirmed && holderSeq != 0 && !h.TooOld()
}

// copiesDuplicates is the duplicate window of the counter stream Provision creates: twice the hold bound.
func copiesDuplicates(cfg Config) time.Duration {
	if cfg.MaxHold > 0 {
		return 2 * cfg.MaxHold
	}
	return cfg.OutputDuplicates
}

// provisionCopies creates the counter stream when it is missing (an age limit of the longest claim TTL and an hour,
// a duplicate window of twice the hold bound). It never fails provisioning: the count is a diagnosis.
func provisionCopies(ctx context.Context, js jetstream.JetStream, cfg Config) {
	if cfg.CopiesStream == "" {
		return
	}
	maxTTL := cfg.DefaultTTL
	for _, spec := range cfg.Sources.Specs {
		maxTTL = max(maxTTL, spec.TTL(cfg.DefaultTTL))
	}
	want := kvwindow.CopiesStreamConfig{Name: cfg.CopiesStream, Replicas: cfg.Replicas, Storage: jetstream.FileStorage,
		MaxAge: maxTTL.Round(time.Second) + time.Hour, Duplicates: copiesDuplicates(cfg)}
	created, problems, err := kvwindow.ProvisionCopies(ctx, js, want)
	switch {
	case err != nil:
		cfg.Logger.Warn("pipeline: counter stream not provisioned: copies a claim suppressed are not counted; deduplication goes on",
			"stream", cfg.CopiesStream, "err", err)
	case created:
		cfg.Logger.Info("pipeline: created stream", "stream", cfg.CopiesStream, "subjects", cfg.CopiesStream+".>",
			"replicas", want.Replicas, "max_age", want.MaxAge)
	}
	for _, pr := range problems {
		cfg.Logger.Warn("pipeline: "+pr, "stream", cfg.CopiesStream)
	}
}
