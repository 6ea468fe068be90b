package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/keys"
)

// Pipeline turns the input stream's deliveries into unique events on the output stream. Create it with New and
// drive it with Run; Ready is safe to call at any time from any goroutine.
type Pipeline struct {
	cfg Config
	js  jetstream.JetStream
	pub jetstream.JetStream // js's API, with a publish timeout and a pending limit sized for MaxInFlight
	log *slog.Logger
	m   *Metrics

	sources map[string]*sourceState
	other   *sourceState

	inPrefixDot, outPrefixDot, dupPrefixDot   string
	unkeyedIDPrefix, dupIDPrefix, dlqIDPrefix string

	running     atomic.Bool
	bound       atomic.Bool
	consumerErr atomic.Pointer[error]   // last consumer info failure (nil: fine)
	windowErr   atomic.Pointer[error]   // last window failure (nil: reachable)
	publishErr  atomic.Pointer[failure] // last publish failure, until a publish succeeds (nil: fine)
	ackFailedAt atomic.Int64            // p.clock() of the last ack that failed (0: none)

	consumerCreated atomic.Int64 // creation time (unix ns) of the consumer bound now: orders deliveries in claims
	rebind          atomic.Bool  // the status poll saw another consumer under the name: bind again
	outMaxMsgSize   atomic.Int64 // the output stream's maximum message size (0: none)
	maxHold         atomic.Int64 // the longest a delivery may be held before it is published (ns)

	epoch     time.Time    // origin of p.clock
	lastTick  atomic.Int64 // p.clock() of the pause detector's last tick
	pauseTill atomic.Int64 // deliveries received before this p.clock() value lived through a pause: never published

	nakWindow, nakPublish, nakDeadLetter, nakShutdown, nakHeld prometheus.Counter

	windowLog, publishLog, bindLog, heldLog, ackLog rateLog
}

// clock is the time since New on the monotonic clock, which keeps counting while the process is stopped
// (SIGSTOP) — what the hold bound and the pause detector measure.
func (p *Pipeline) clock() time.Duration { return time.Since(p.epoch) }

// sourceState is what the pipeline knows about one source label: the spec and the metric children, resolved once.
type sourceState struct {
	spec                                     keys.Spec
	unique, duplicate, unkeyedN, deadLetters prometheus.Counter
	reasons                                  map[keys.Reason]prometheus.Counter
	label                                    string
	m                                        *Metrics
}

func (s *sourceState) reason(r keys.Reason) prometheus.Counter {
	if c, ok := s.reasons[r]; ok {
		return c
	}
	return s.m.unkeyed.WithLabelValues(s.label, string(r))
}

// ReasonUnverified is the unkeyed reason of a delivery whose ingest service could not verify its signature
// (header Ingest-Verified: false); ReasonWindowUnavailable that of a delivery forwarded while the window was down
// (only with Config.ForwardWhenWindowDown).
const (
	ReasonUnverified        keys.Reason = "unverified"
	ReasonWindowUnavailable keys.Reason = "window-unavailable"
)

var allReasons = []keys.Reason{keys.ReasonNoDedupe, keys.ReasonMissing, keys.ReasonTooLarge, keys.ReasonNotJSON,
	ReasonUnverified, ReasonWindowUnavailable}

// otherSource is the source label of an undeclared source.
const otherSource = "other"

// New checks cfg (after applying defaults) and returns a pipeline ready to Run. Errors start with "pipeline: " and
// name the field at fault.
func New(cfg Config) (*Pipeline, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pub, err := publisher(cfg.JetStream, cfg.PublishTimeout, pendingLimit(cfg.MaxInFlight))
	if err != nil {
		return nil, err
	}
	p := &Pipeline{
		cfg:             cfg,
		js:              cfg.JetStream,
		pub:             pub,
		epoch:           time.Now(),
		log:             cfg.Logger,
		m:               cfg.Metrics,
		sources:         make(map[string]*sourceState, len(cfg.Sources.Specs)),
		inPrefixDot:     cfg.InputPrefix + ".",
		outPrefixDot:    cfg.OutputPrefix + ".",
		unkeyedIDPrefix: "msg/",
		dupIDPrefix:     "dup/",
		dlqIDPrefix:     "dlq/",
		nakWindow:       cfg.Metrics.naks.WithLabelValues(NakWindow),
		nakPublish:      cfg.Metrics.naks.WithLabelValues(NakPublish),
		nakDeadLetter:   cfg.Metrics.naks.WithLabelValues(NakDeadLetter),
		nakShutdown:     cfg.Metrics.naks.WithLabelValues(NakShutdown),
		nakHeld:         cfg.Metrics.naks.WithLabelValues(NakHeld),
	}
	p.maxHold.Store(int64(p.holdBound(duplicateWindow(cfg.AckWait))))
	for _, r := range []string{AckRefused, AckError} {
		p.m.ackFailures.WithLabelValues(r)
	}
	if cfg.DuplicatesPrefix != "" {
		p.dupPrefixDot = cfg.DuplicatesPrefix + "."
	}
	newState := func(label string, spec keys.Spec) *sourceState {
		s := &sourceState{
			spec:        spec,
			label:       label,
			m:           p.m,
			unique:      p.m.envelopes.WithLabelValues(label, OutcomeUnique),
			duplicate:   p.m.envelopes.WithLabelValues(label, OutcomeDuplicate),
			unkeyedN:    p.m.envelopes.WithLabelValues(label, OutcomeUnkeyed),
			deadLetters: p.m.envelopes.WithLabelValues(label, OutcomeDeadLetter),
			reasons:     make(map[keys.Reason]prometheus.Counter, len(allReasons)),
		}
		for _, r := range allReasons {
			s.reasons[r] = p.m.unkeyed.WithLabelValues(label, string(r))
		}
		return s
	}
	for id := range cfg.Sources.Specs {
		spec, _ := cfg.Sources.Lookup(id)
		p.sources[id] = newState(id, spec)
	}
	p.other = newState(otherSource, keys.Spec{})
	p.m.sourcesWithoutDedupe.Set(float64(len(cfg.Sources.WithoutDedupe)))
	p.m.ready.Set(0)
	return p, nil
}

// source returns the state of a source id: its own when declared, the shared "other" state otherwise.
func (p *Pipeline) source(id string) *sourceState {
	if s, ok := p.sources[id]; ok {
		return s
	}
	return p.other
}

// publisher is a JetStream handle on js's connection and API (domain or prefix) whose asynchronous publishes time
// out after timeout and are limited to maxPending outstanding: the library forgets a publish it gave up on, so
// that publishes lost in a leader change never pile up to its limit and stall every later one.
func publisher(js jetstream.JetStream, timeout time.Duration, maxPending int) (jetstream.JetStream, error) {
	opts := []jetstream.JetStreamOpt{
		jetstream.WithPublishAsyncTimeout(timeout),
		jetstream.WithPublishAsyncMaxPending(maxPending),
	}
	o := js.Options()
	var pub jetstream.JetStream
	var err error
	switch {
	case o.Domain != "":
		pub, err = jetstream.NewWithDomain(js.Conn(), o.Domain, opts...)
	case o.APIPrefix != "" && o.APIPrefix != jetstream.DefaultAPIPrefix:
		pub, err = jetstream.NewWithAPIPrefix(js.Conn(), o.APIPrefix, opts...)
	default:
		pub, err = jetstream.New(js.Conn(), opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: publisher: %w", err)
	}
	return pub, nil
}

// pendingLimit is the client's limit of outstanding asynchronous publishes: each worker has at most one publish
// outstanding and the library forgets it after PublishTimeout, so twice MaxInFlight is never reached.
func pendingLimit(maxInFlight int) int { return 2*maxInFlight + 64 }

// errNotRunning is Ready's answer before Run starts and after it returns.
var errNotRunning = errors.New("pipeline: not running")

// Ready reports whether the pipeline can make progress: Run is running, the NATS connection is up, the consumer
// is bound and answering, and the window is reachable. It only reads state kept up to date by Run (claims, the
// consume loop, and a status poll every StatusInterval), so it is cheap enough for every /readyz request.
func (p *Pipeline) Ready(ctx context.Context) error {
	_ = ctx
	return p.readiness()
}

func (p *Pipeline) readiness() error {
	if !p.running.Load() {
		return errNotRunning
	}
	if nc := p.js.Conn(); !nc.IsConnected() {
		return fmt.Errorf("pipeline: not connected to NATS (%s)", nc.Status())
	}
	if !p.bound.Load() {
		return fmt.Errorf("pipeline: not consuming from %s > %s", p.cfg.InputStream, p.cfg.Consumer)
	}
	if e := p.consumerErr.Load(); e != nil {
		return fmt.Errorf("pipeline: consumer %s > %s: %w", p.cfg.InputStream, p.cfg.Consumer, *e)
	}
	if e := p.windowErr.Load(); e != nil {
		return fmt.Errorf("pipeline: window unreachable: %w", *e)
	}
	if e := p.publishErr.Load(); e != nil && p.clock()-e.at < p.failureQuiet() {
		return fmt.Errorf("pipeline: publishes to %s failing: %w", p.cfg.OutputStream, e.err)
	}
	if at := p.ackFailedAt.Load(); at != 0 && p.clock()-time.Duration(at) < p.failureQuiet() {
		return fmt.Errorf("pipeline: acknowledgements failing (the last %s ago); envelopes are redelivered after the ack wait",
			(p.clock() - time.Duration(at)).Round(time.Millisecond))
	}
	return nil
}

// failureQuiet is how long after the last failed publish (with no success since) or failed ack the pipeline stays
// unready. Acks are sent without an answer, so their success shows only as the absence of failures; and with
// nothing left to publish, no success can clear a publish failure.
func (p *Pipeline) failureQuiet() time.Duration { return max(10*time.Second, 2*p.cfg.StatusInterval) }

// failure is an error and when (p.clock) it happened.
type failure struct {
	err error
	at  time.Duration
}

func (p *Pipeline) publishUp() {
	if p.publishErr.Load() != nil && p.publishErr.Swap(nil) != nil {
		p.log.Info("pipeline: publishes succeed again", "stream", p.cfg.OutputStream)
		p.updateReady()
	}
}

func (p *Pipeline) publishDown(err error) {
	if p.publishErr.Swap(&failure{err, p.clock()}) == nil {
		p.updateReady()
	}
	if ok, n := p.publishLog.allow(); ok {
		p.log.Warn("pipeline: publish failed; envelopes are handed back (NAK with backoff)",
			"stream", p.cfg.OutputStream, "err", err, "failures_since_last_log", n)
	}
}

// ackFailed records an acknowledgement that did not reach the consumer. The envelope is redelivered after the ack
// wait and finds its own claim, so nothing is lost or doubled, but a pipeline whose acks keep failing redelivers
// everything for ever: it is counted, logged and makes the pipeline unready.
func (p *Pipeline) ackFailed(reason string, err error) {
	p.m.ackFailures.WithLabelValues(reason).Inc()
	if p.ackFailedAt.Swap(int64(max(p.clock(), 1))) == 0 {
		p.updateReady()
	}
	if ok, n := p.ackLog.allow(); ok {
		p.log.Error("pipeline: acknowledgement failed; the envelope will be redelivered after the ack wait",
			"reason", reason, "err", err, "failures_since_last_log", n)
	}
}

// asyncError wraps the connection's asynchronous error handler: the server refuses an ack (a permissions
// violation on $JS.ACK.>) only in an asynchronous -ERR, never to the Ack call.
func (p *Pipeline) asyncError(prev nats.ErrHandler) nats.ErrHandler {
	return func(nc *nats.Conn, sub *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), "\"$js.ack.") {
			p.ackFailed(AckRefused, err)
		}
		if prev != nil {
			prev(nc, sub, err)
		}
	}
}

// tooOld says why a delivery received at received must not be published now ("" when it may): it has been held
// longer than the hold bound, or the process was paused (stopped, frozen) since it was received. In both cases the
// server may have redelivered it to another replica, which may have published it longer ago than the output
// stream's duplicate window remembers.
func (p *Pipeline) tooOld(received time.Duration) string {
	now := p.clock()
	if held, bound := now-received, time.Duration(p.maxHold.Load()); held > bound {
		return fmt.Sprintf("held %s, longer than the hold bound %s", held.Round(time.Millisecond), bound)
	}
	if received < time.Duration(p.pauseTill.Load()) {
		return "the process was paused after the delivery arrived"
	}
	if last := time.Duration(p.lastTick.Load()); last > 0 && now-last > p.pauseThreshold() {
		return fmt.Sprintf("the process was paused (no tick for %s)", (now - last).Round(time.Millisecond))
	}
	return ""
}

// holdBound is the longest a delivery may be held before it is published, given the output stream's duplicate
// window: half of it, or MaxHold when set. A publish handed to the client within the bound is stored, or given
// up, well inside the window, so a later delivery's publish under the same Nats-Msg-Id still collapses.
func (p *Pipeline) holdBound(dupWindow time.Duration) time.Duration {
	if p.cfg.MaxHold > 0 {
		return p.cfg.MaxHold
	}
	if dupWindow <= 0 {
		return p.cfg.AckWait
	}
	return dupWindow / 2
}

// pauseThreshold is the gap between two ticks of the pause detector (every pauseTick) that counts as a pause of
// the process rather than scheduling noise.
func (p *Pipeline) pauseThreshold() time.Duration {
	// At least 2s: a tick delayed that long is no scheduling hiccup, even on a loaded machine under the race
	// detector; a false alarm only costs redeliveries.
	return min(5*time.Second, max(2*time.Second, time.Duration(p.maxHold.Load())/4))
}

const pauseTick = 100 * time.Millisecond

// pauseLoop notices that the process was stopped (SIGSTOP, a frozen container): every delivery received before
// the pause, or in the moments after it while the client hands over what it buffered meanwhile, is handed back
// instead of published, and the consume loop binds again so that buffered deliveries are dropped.
func (p *Pipeline) pauseLoop(ctx context.Context) {
	t := time.NewTicker(pauseTick)
	defer t.Stop()
	p.lastTick.Store(int64(p.clock()))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := p.clock()
		gap := now - time.Duration(p.lastTick.Load())
		if gap > p.pauseThreshold() {
			p.pauseTill.Store(int64(now + time.Second))
			p.rebind.Store(true)
			p.log.Warn("pipeline: the process was paused; deliveries held across the pause are handed back", "pause", gap.Round(time.Millisecond))
		}
		p.lastTick.Store(int64(now))
	}
}

func (p *Pipeline) updateReady() {
	if p.readiness() == nil {
		p.m.ready.Set(1)
	} else {
		p.m.ready.Set(0)
	}
}

func (p *Pipeline) setBound(b bool) {
	if p.bound.Swap(b) != b {
		p.updateReady()
	}
}

func (p *Pipeline) windowUp() {
	if p.windowErr.Load() != nil && p.windowErr.Swap(nil) != nil {
		p.log.Info("pipeline: window reachable again")
		p.updateReady()
	}
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

// runState is what one Run shares with its consume handler and workers.
type runState struct {
	work     chan delivery
	stopping chan struct{} // closed when Run's context is done: the handler hands back what it receives
	stopOnce sync.Once
	quit     chan struct{} // closed once consuming stopped: idle workers exit
}

// delivery is a message with the moment (p.clock) the consume handler received it.
type delivery struct {
	m  jetstream.Msg
	at time.Duration
}

func (rs *runState) stop() { rs.stopOnce.Do(func() { close(rs.stopping) }) }

// Run consumes until ctx is cancelled (or the NATS connection is closed for good), then shuts down: it stops
// pulling, hands back what was pulled but not started (NAK), lets in-flight envelopes finish for up to
// ShutdownTimeout (what cannot finish is handed back, never acknowledged), waits for outstanding publishes and
// returns. With Config.Provision it first creates missing streams and the consumer, retrying while JetStream is
// unreachable. Run returns nil after a cancellation; only one Run may be active at a time.
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("pipeline: Run is already running")
	}
	defer func() {
		p.running.Store(false)
		p.bound.Store(false)
		p.m.ready.Set(0)
	}()

	// Status: consumer pending and window health, for metrics and Ready. Owned by Run, stopped last.
	bgCtx, bgCancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer func() { bgCancel(); bg.Wait() }()
	bg.Go(func() { p.statusLoop(bgCtx) })
	bg.Go(func() { p.pauseLoop(bgCtx) })

	// Refused acks show only as asynchronous errors of the connection.
	nc := p.js.Conn()
	prevErrHandler := nc.ErrorHandler()
	nc.SetErrorHandler(p.asyncError(prevErrHandler))
	defer nc.SetErrorHandler(prevErrHandler)

	if p.cfg.Provision {
		if err := p.provision(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	p.refreshStreams(ctx)

	rs := &runState{
		work:     make(chan delivery),
		stopping: make(chan struct{}),
		quit:     make(chan struct{}),
	}
	// Workers run under workCtx, which outlives ctx by at most ShutdownTimeout.
	workCtx, workCancel := context.WithCancel(context.Background())
	defer workCancel()
	var workers sync.WaitGroup
	for range p.cfg.MaxInFlight {
		workers.Go(func() { p.newWorker(workCtx).loop(rs) })
	}

	runErr := p.consume(ctx, rs)

	// Shutdown: pulling has stopped and the handler hands back anything it still receives.
	rs.stop()
	end := time.Now().Add(p.cfg.ShutdownTimeout)
	close(rs.quit)
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	if !waitFor(done, time.Until(end)) {
		p.log.Warn("pipeline: shutdown timeout: handing back envelopes still in flight", "timeout", p.cfg.ShutdownTimeout)
		workCancel()
		// Every blocking step of a worker selects on workCtx, and a window call is bounded by its own timeout.
		// Should a window ignore both, do not hang: what such a worker does later can only be a NAK.
		if !waitFor(done, 10*time.Second) {
			p.log.Error("pipeline: workers still busy after cancellation; returning without them")
		}
	}
	if !waitFor(p.js.PublishAsyncComplete(), max(time.Until(end), 100*time.Millisecond)) {
		p.log.Warn("pipeline: shutdown timeout: publishes still unacknowledged", "pending", p.js.PublishAsyncPending())
	}
	p.log.Info("pipeline: stopped")
	return runErr
}

func (p *Pipeline) provision(ctx context.Context) error {
	bo := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	for {
		err := Provision(ctx, p.js, p.cfg)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if !retryable(err) {
			return err
		}
		p.log.Warn("pipeline: provisioning failed; retrying", "err", err)
		if !bo.sleep(ctx) {
			return nil
		}
	}
}

// retryable reports whether a JetStream API failure may go away by itself (no responders, timeouts, a server
// without a leader yet) rather than being the server's definite answer.
func retryable(err error) bool {
	if errors.Is(err, ErrIncompatible) || errors.Is(err, ErrConsumerStart) {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500
	}
	return true
}

var errConnClosed = errors.New("pipeline: NATS connection closed")

// consume binds the consumer and keeps a Consume loop alive until ctx is done. The client library re-pulls after a
// reconnect or missed heartbeats by itself; when the loop stops (consumer deleted, connection closed) it is
// re-created. It never creates the consumer again (that would replay the stream): a deleted consumer leaves the
// pipeline unready until an operator restores it or restarts with Provision.
func (p *Pipeline) consume(ctx context.Context, rs *runState) error {
	nc := p.js.Conn()
	handler := func(m jetstream.Msg) {
		select {
		case rs.work <- delivery{m, p.clock()}:
		case <-rs.stopping:
			_ = m.Nak()
			p.nakShutdown.Inc()
		}
	}
	errHandler := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		switch {
		case errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
			errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrServerShutdown):
			p.log.Debug("pipeline: consume", "err", err)
		default:
			p.log.Warn("pipeline: consume", "err", err)
		}
	})
	expiry, heartbeat := pullTimes(p.cfg.AckWait)
	opts := []jetstream.PullConsumeOpt{
		jetstream.PullMaxMessages(p.cfg.MaxInFlight),
		jetstream.PullExpiry(expiry),
		jetstream.PullHeartbeat(heartbeat),
		errHandler,
	}
	bo := backoff{min: 100 * time.Millisecond, max: 5 * time.Second}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if nc.IsClosed() {
			return errConnClosed
		}
		cc, err := p.bind(ctx, handler, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if p.cfg.Provision && (errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
				// Deleted by an operator (or with its stream): create what is missing again. Provision refuses to
				// create a consumer that would replay processed envelopes (ErrConsumerStart).
				if perr := Provision(ctx, p.js, p.cfg); perr != nil {
					err = perr
				} else {
					continue
				}
			}
			if ok, _ := p.bindLog.allow(); ok {
				p.log.Warn("pipeline: cannot consume; retrying", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "err", err)
			}
			if !bo.sleep(ctx) {
				return nil
			}
			continue
		}
		bo.reset()
		p.setBound(true)
		p.log.Info("pipeline: consuming", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "max_in_flight", p.cfg.MaxInFlight)
		closed := cc.Closed()
	watch:
		for {
			select {
			case <-ctx.Done():
				rs.stop()
				cc.Drain() // buffered envelopes go through the handler, which hands them back
				t := time.NewTimer(min(5*time.Second, p.cfg.ShutdownTimeout))
				select {
				case <-closed:
				case <-t.C:
					cc.Stop()
				}
				t.Stop()
				p.setBound(false)
				return nil
			case <-closed:
				p.setBound(false)
				p.log.Warn("pipeline: consume loop stopped; binding again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
				break watch
			case <-tick.C:
				if nc.IsClosed() {
					cc.Stop()
					p.setBound(false)
					return errConnClosed
				}
				if p.rebind.Swap(false) {
					// Another consumer under the name, or the process was paused: drop what the client buffered
					// (it is redelivered after the ack wait) and bind again.
					cc.Stop()
					p.setBound(false)
					p.log.Warn("pipeline: binding the consumer again", "stream", p.cfg.InputStream, "consumer", p.cfg.Consumer)
					bo.reset()
					break watch
				}
			}
		}
		if !bo.sleep(ctx) {
			return nil
		}
	}
}

func (p *Pipeline) bind(ctx context.Context, handler jetstream.MessageHandler, opts []jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	p.consumerCreated.Store(c.CachedInfo().Created.UnixNano())
	p.rebind.Store(false)
	return c.Consume(handler, opts...)
}

// pullTimes are the consume loop's pull expiry and heartbeat: short against the ack wait (and so against the output
// stream's duplicate window), so that a pull request left open by a replica that stopped answering (paused, cut
// off) stops taking deliveries soon.
func pullTimes(ackWait time.Duration) (expiry, heartbeat time.Duration) {
	expiry = min(15*time.Second, max(time.Second, ackWait/2))
	heartbeat = max(500*time.Millisecond, expiry/4)
	return expiry, heartbeat
}

// statusLoop refreshes the consumer's pending count and the window's health every StatusInterval.
func (p *Pipeline) statusLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.StatusInterval)
	defer t.Stop()
	for {
		p.refreshStatus(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pipeline) refreshStatus(ctx context.Context) {
	timeout := min(max(p.cfg.StatusInterval, time.Second), 5*time.Second)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		p.consumerErr.Store(&err)
	} else {
		p.consumerErr.Store(nil)
		info := c.CachedInfo()
		p.m.consumerPending.Set(float64(info.NumPending))
		if p.bound.Load() && info.Created.UnixNano() != p.consumerCreated.Load() {
			p.rebind.Store(true) // deleted and created again since it was bound
		}
	}
	p.refreshStreams(ctx)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.cfg.Window.Ping(wctx); err != nil {
		if ctx.Err() != nil {
			return
		}
		if p.windowErr.Swap(&err) == nil {
			p.log.Warn("pipeline: window ping failed", "err", err)
		}
	} else {
		p.windowUp()
	}
	p.updateReady()
}

// refreshStreams reads the three streams' state for the size gauges, and the output stream's limits: its maximum
// message size (checked before a claim) and its duplicate window (the hold bound derives from it).
func (p *Pipeline) refreshStreams(ctx context.Context) {
	for _, name := range []string{p.cfg.InputStream, p.cfg.OutputStream, p.cfg.DLQStream} {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := p.js.Stream(cctx, name)
		cancel()
		if err != nil {
			continue
		}
		info := st.CachedInfo()
		p.m.streamMessages.WithLabelValues(name).Set(float64(info.State.Msgs))
		p.m.streamBytes.WithLabelValues(name).Set(float64(info.State.Bytes))
		if name == p.cfg.OutputStream {
			p.outMaxMsgSize.Store(int64(max(info.Config.MaxMsgSize, 0)))
			p.maxHold.Store(int64(p.holdBound(info.Config.Duplicates)))
		}
	}
}

// waitFor waits up to d for ch to be closed.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// backoff is a capped exponential delay for retry loops.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits for the next delay; false when ctx was cancelled first.
func (b *backoff) sleep(ctx context.Context) bool {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	t := time.NewTimer(b.cur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// nakDelay is the redelivery delay of an envelope handed back after delivered attempts: 250ms, doubling, at most
// 5s.
func nakDelay(delivered uint64) time.Duration {
	const first, limit = 250 * time.Millisecond, 5 * time.Second
	d := first
	for i := uint64(1); i < delivered && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// rateLog lets one log line through every logEvery and counts what it held back.
type rateLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const logEvery = 5 * time.Second

func (r *rateLog) allow() (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.last) < logEvery {
		r.suppressed++
		return false, 0
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return true, n
}
