package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// Ready reports whether the pipeline can make progress: Run is running, the NATS connection is up, the consumer
// is bound, accepts the pull requests (pullStuckAfter) and answers, the leaders of the consumer, the input and
// output streams and the window's buckets have their quorum (leaderCutOff) and answer (streamSilence), the window
// is reachable, and publishes, dead letters and acks have not failed lately (failureQuiet). It only reads state
// that Run keeps up to date, so it is cheap enough for every /readyz request.
func (p *Pipeline) Ready(context.Context) error { return p.readiness() }

func (p *Pipeline) readiness() error {
	if !p.running.Load() {
		return errNotRunning
	}
	if p.waitingLast.Load() {
		return errors.New("pipeline: not consuming yet: waiting for the previous Run's workers to finish their " +
			"shutdown (recording, releasing and acknowledging what they had stored)")
	}
	if nc := p.nc; !nc.IsConnected() {
		down := ""
		if at := p.link.downSince.Load(); at != 0 {
			down = " for " + (p.clock() - time.Duration(at)).Round(100*time.Millisecond).String()
		}
		return fmt.Errorf("pipeline: not connected to NATS (%s%s): the server is down or out of reach; a restarted "+
			"nats-server takes connections only once it has recovered its streams, the window's bucket among them "+
			"(seconds per million keys), and the worker resumes by itself", nc.Status(), down)
	}
	if !p.bound.Load() {
		if e := p.bindErr.Load(); e != nil {
			return fmt.Errorf("pipeline: not consuming from %s > %s: %w", p.cfg.InputStream, p.cfg.Consumer, *e)
		}
		return fmt.Errorf("pipeline: not consuming from %s > %s", p.cfg.InputStream, p.cfg.Consumer)
	}
	if err := p.pulls.stuck(p.clock()); err != nil {
		return fmt.Errorf("pipeline: consumer %s > %s: %w", p.cfg.InputStream, p.cfg.Consumer, err)
	}
	if e := p.quorumErr.Load(); e != nil {
		return *e
	}
	consumerErr := p.consumerErr.Load()
	if consumerErr != nil {
		if _, quiet := kvwindow.NotAnswering(*consumerErr); !quiet {
			return fmt.Errorf("pipeline: consumer %s > %s: %w", p.cfg.InputStream, p.cfg.Consumer, *consumerErr)
		}
	}
	if e := p.windowErr.Load(); e != nil {
		return p.windowReason(*e)
	}
	if consumerErr != nil {
		return fmt.Errorf("pipeline: consumer %s > %s not answering (its server stopping, or back and still "+
			"recovering its streams, or the stream without a leader; the worker resumes by itself): %w",
			p.cfg.InputStream, p.cfg.Consumer, *consumerErr)
	}
	if e := p.silentErr.Load(); e != nil {
		return *e
	}
	if e := p.publishes.standing.Load(); e != nil && p.clock()-e.at < p.failureQuiet() {
		return fmt.Errorf("pipeline: publishes to %s failing: %w", p.cfg.OutputStream, e.err)
	}
	if e := p.deadLetters.standing.Load(); e != nil && p.clock()-e.at < p.failureQuiet() {
		return fmt.Errorf("pipeline: dead letters to %s failing; the envelopes that cannot be processed are handed back: %w", p.cfg.DLQStream, e.err)
	}
	if e := p.acks.standing.Load(); e != nil && p.clock()-e.at < p.failureQuiet() {
		return fmt.Errorf("pipeline: acknowledgements failing (the last %s ago); envelopes are redelivered after the ack wait",
			(p.clock() - e.at).Round(time.Millisecond))
	}
	return nil
}

// windowReason says why the window cannot be used. A bucket that does not answer (rather than refuses) passes by
// itself; right after a reconnect it is the server rebuilding the bucket's state (seconds per million keys).
func (p *Pipeline) windowReason(err error) error {
	bucket, quiet := kvwindow.NotAnswering(err)
	if !quiet {
		return fmt.Errorf("pipeline: window unreachable: %w", err)
	}
	what := "the window's bucket"
	if bucket != "" {
		what = "bucket " + bucket
	}
	if back := p.link.backAt.Load(); back != 0 && p.link.recovering.Load() != 0 {
		return fmt.Errorf("pipeline: dedupe window recovering: %s not answering yet, %s after the reconnect (its "+
			"server restarting, or rebuilding the bucket's state after a restart: seconds per million keys; the "+
			"worker resumes by itself): %w", what, (p.clock() - time.Duration(back)).Round(100*time.Millisecond), err)
	}
	return fmt.Errorf("pipeline: dedupe window not answering: %s (its server stopping or restarting, or the "+
		"bucket's stream without a leader; the worker resumes by itself): %w", what, err)
}

// failureQuiet is how long after the last failed publish (with no success since) or failed ack the pipeline stays
// unready: with nothing left to publish or acknowledge, no success can clear a failure.
func (p *Pipeline) failureQuiet() time.Duration { return max(10*time.Second, 2*p.cfg.StatusInterval) }

// failure is an error, when (p.clock) it happened, and when the request that failed was sent.
type failure struct {
	err  error
	at   time.Duration
	sent time.Duration
}

// requests is what the answers to one kind of request (output publishes, dead letters, acks) say for readiness.
type requests struct {
	standing atomic.Pointer[failure] // the failure that stands (nil: none)
	// ok is p.clock() of the last success: a publish or dead letter stored, an ack confirmed (0: none).
	ok atomic.Int64
}

// superseded reports whether a request sent at sent that failed says nothing about now: a request of the same
// kind succeeded after it was sent. A publish or an ack that waits out its timeout across a leader change fails
// after the ones behind it went through; counting it would leave a drained pipeline unready for failureQuiet, with
// nothing left to clear it.
func (r *requests) superseded(sent time.Duration) bool {
	ok := r.ok.Load()
	return ok != 0 && time.Duration(ok) >= sent
}

// answered records an answer at now, never moving the last one back.
func (r *requests) answered(now time.Duration) {
	v := int64(max(now, 1))
	for cur := r.ok.Load(); cur < v && !r.ok.CompareAndSwap(cur, v); cur = r.ok.Load() {
	}
}

// stand makes f the standing failure, unless an answer superseded it or the failure of a request sent later
// stands already. It reports whether r went from no failure to one, or back.
func (r *requests) stand(f *failure) (changed bool) {
	for {
		cur := r.standing.Load()
		if r.superseded(f.sent) || cur != nil && cur.sent > f.sent {
			return false
		}
		if r.standing.CompareAndSwap(cur, f) {
			changed = cur == nil
			break
		}
	}
	// An answer recorded between the check and the swap came after f's request (and every earlier one) was sent.
	if r.superseded(f.sent) && r.standing.CompareAndSwap(f, nil) {
		changed = !changed
	}
	return changed
}

// ackUp records an ack the server confirmed. It leaves a standing ack failure in place: acks that fail now and
// then keep the pipeline unready until none has failed for failureQuiet.
func (p *Pipeline) ackUp() { p.acks.answered(p.clock()) }

func (p *Pipeline) publishUp() {
	p.cleared(&p.publishes, "pipeline: publishes succeed again", p.cfg.OutputStream)
}

// cleared records an answer to a request of r's kind, and clears a failure it supersedes (stand).
func (p *Pipeline) cleared(r *requests, msg, stream string) {
	r.answered(p.clock())
	for {
		cur := r.standing.Load()
		if cur == nil || !r.superseded(cur.sent) {
			return
		}
		if r.standing.CompareAndSwap(cur, nil) {
			p.log.Info(msg, "stream", stream)
			p.updateReady()
			return
		}
	}
}

// failed records a request of r's kind, sent at sent (p.clock), that failed with err (stand). A request not sent
// while disconnected is the connection's failure, reported as long as it lasts.
func (p *Pipeline) failed(r *requests, err error, sent time.Duration) {
	if !p.offline(err) && r.stand(&failure{err: err, at: p.clock(), sent: sent}) {
		p.updateReady()
	}
}

func (p *Pipeline) publishDown(err error, sent time.Duration) {
	p.failed(&p.publishes, err, sent)
	if ok, n := p.publishLog.allow(); ok {
		p.log.Warn("pipeline: publish failed; envelopes are handed back (NAK with backoff)",
			"stream", p.cfg.OutputStream, "err", err, "failures_since_last_log", n)
	}
}

// ackFailed records an ack sent at sent (p.clock) that did not reach the consumer: a pipeline whose acks keep
// failing redelivers everything for ever, so it is counted, logged and makes the pipeline unready.
func (p *Pipeline) ackFailed(reason string, err error, sent time.Duration) {
	p.m.ackFailures.WithLabelValues(reason).Inc()
	p.failed(&p.acks, err, sent)
	if ok, n := p.ackLog.allow(); ok {
		p.log.Error("pipeline: acknowledgement failed; the envelope will be redelivered after the ack wait",
			"reason", reason, "err", err, "failures_since_last_log", n)
	}
}

// ackRefusal returns the server's refusal of the ack of d, when the connection's last error is one. The server
// refuses a publish it does not permit ($JS.ACK.>) only in an asynchronous -ERR naming the subject, which the
// connection keeps as its last error: read there, the connection's error handler stays its owner's. Any other
// refusal replaces it there.
func (p *Pipeline) ackRefusal(d *delivery) error {
	err := p.nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	_, subj, ok := strings.Cut(err.Error(), "Publish to \"")
	if subj, _, ok = strings.Cut(subj, "\""); !ok {
		return nil
	}
	if stream, _, _, _, ok := parseAckSubject(subj); !ok || stream != d.stream {
		return nil
	}
	return err
}

// updateReady sets dedupeworker_ready from the state as it is now. Every change calls it after storing itself; the
// lock makes the gauge end on the latest answer (unlocked, an older read could be written last).
func (p *Pipeline) updateReady() {
	p.readyMu.Lock()
	defer p.readyMu.Unlock()
	p.m.ready.Set(oneIf(p.readiness() == nil))
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (p *Pipeline) setBound(b bool) {
	if p.bound.Swap(b) != b {
		p.updateReady()
	}
}

// windowUp records a ping the window answered, clearing any window error.
func (p *Pipeline) windowUp() { p.windowCleared(func(error) bool { return true }) }

// claimUp records a claim the window took, clearing the window error it disproves (claimClears).
func (p *Pipeline) claimUp() { p.windowCleared(claimClears) }

// windowCleared clears the window error when clears says the answer disproves it.
func (p *Pipeline) windowCleared(clears func(error) bool) {
	for {
		cur := p.windowErr.Load()
		if cur == nil || !clears(*cur) {
			return
		}
		if p.windowErr.CompareAndSwap(cur, nil) {
			p.updateReady()
			p.log.Info("pipeline: window reachable again")
			return
		}
	}
}

// claimClears decides whether a claim that succeeded clears the window error err. Not an age limit (the bucket
// takes the short claims and refuses the longer ones, and the poll's Ping reports it: cleared by every short
// claim, readiness would flap between polls), nor a lost bucket or one edited to discard old (the other shards of
// a sharded window succeed).
func claimClears(err error) bool {
	return !errors.Is(err, kvwindow.ErrAgeLimit) && !errors.Is(err, kvwindow.ErrEvicting) && !errors.Is(err, kvwindow.ErrWindowLost)
}

func (p *Pipeline) windowDown(err error) {
	p.m.windowErrors.Inc()
	if p.windowErr.Swap(&err) == nil {
		p.updateReady()
	}
	if ok, n := p.windowLog.allow(); ok {
		p.log.Warn("pipeline: window unavailable; envelopes are held back (NAK with backoff)",
			"err", err, "errors_since_last_log", n, "forwarding_unkeyed", p.cfg.ForwardWhenWindowDown)
	}
}
