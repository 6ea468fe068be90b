package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// Pipeline turns the input stream's deliveries into unique events on the output stream. Create it with New and
// drive it with Run; Ready is safe to call at any time from any goroutine.
type Pipeline struct {
	cfg Config
	js  jetstream.JetStream
	req *natsreq.Mux // acks that wait for their confirmation, and output publishes (set by Run)
	nc  *nats.Conn

	apiPrefix string // the JetStream API's subject prefix ("$JS.API." unless a domain or prefix is set)
	// inputKeeps says the input stream keeps acknowledged envelopes (not work-queue retention, or not known yet):
	// a copy cannot then tell a finished holder by its absence, so every keyed publish is recorded in its claim.
	inputKeeps atomic.Bool
	log        *slog.Logger
	m          *Metrics

	sources map[string]*sourceState
	other   *sourceState

	running atomic.Bool
	bound   atomic.Bool
	// lastWorkers is closed once the last Run's workers have all returned: a Run that spent its budget returns
	// without them, and the next one waits for them (written and read only by the Run holding running).
	lastWorkers chan struct{}
	waitingLast atomic.Bool             // Run waits for lastWorkers before it does anything else
	consumerErr atomic.Pointer[error]   // last consumer info failure (nil: fine)
	quorumErr   atomic.Pointer[error]   // the consumer's or a stream's leader cut off from its replicas (nil: fine)
	silentErr   atomic.Pointer[error]   // a stream's leader not answering the status poll (nil: fine)
	streams     watches                 // what the status polls know of each stream's leader (status.go)
	windowErr   atomic.Pointer[error]   // last window failure (nil: reachable)
	publishes   requests                // output publishes: a failure stands until a publish is stored
	acks        requests                // a failure stands for failureQuiet (ackUp)
	link        link                    // the NATS connection's last outage (status.go)
	pulls       pullHealth              // what the consumer answers to the pull requests (pull.go)
	pullSub     atomic.Pointer[pullSub] // the pull subscription of the consumer bound now (nil: none)
	readyMu     sync.Mutex              // orders updateReady's read of the state above and its gauge write

	consumerCreated atomic.Int64 // creation time (unix ns) of the consumer bound now: orders deliveries in claims
	rebind          atomic.Bool  // the status poll saw another consumer under the name, or none: bind again
	outMaxMsgSize   atomic.Int64 // the output stream's maximum message size (0: none)
	maxHold         atomic.Int64 // the longest a delivery may be held before it is published (ns)

	// What was found missing or unusable under the running worker (consume.go, outcome.go).
	seenConsumer atomic.Pointer[seenConsumer] // the consumer whose warnings were logged last, as last read (bind, consumerEdited)
	bindErr      atomic.Pointer[error]        // why the consume loop cannot bind the consumer now, or why provisioning retries (nil: bound, or not tried)
	missing      atomic.Bool                  // a publish found no stream to take it: create it again (with Provision)
	deadLetters  requests                     // a failure stands until a dead letter is stored

	epoch     time.Time    // origin of p.clock
	lastTick  atomic.Int64 // p.clock() of the pause detector's last tick
	pauseTill atomic.Int64 // deliveries received before this p.clock() value lived through a pause: never published

	naks [protocol.NakRecord + 1]prometheus.Counter // by protocol.NakReason (0: the window's)

	holders *holders // claims held by this process's workers, and the last ones they published
	// decide is the protocol the workers execute (protocol.Decide; a test may wrap it).
	decide protocol.Decider

	outDupWindow atomic.Int64 // the output stream's duplicate window (ns), as the status poll last read it
	outCreated   atomic.Int64 // the output stream's creation time (unix ns), as the status poll last read it
	// consumerAckWait is the consumer's ack wait (ns) as the status poll last read it: the server redelivers after
	// it, whatever DEDUPE_ACK_WAIT says.
	consumerAckWait atomic.Int64
	dupShort        atomic.Bool // checkDupWindow's last verdict
	inputWatch      inputWatch  // what the status polls found of the input stream's limits (inputlimits.go)

	windowLog, publishLog, bindLog, heldLog, ackLog, holderLog, provisionLog rateLog
}

// clock is the time since New on the monotonic clock, which keeps counting while the process is stopped
// (SIGSTOP) — what the hold bound and the pause detector measure.
func (p *Pipeline) clock() time.Duration { return time.Since(p.epoch) }

// sourceState is what the pipeline knows about one source label: the spec and the metric children, resolved once.
type sourceState struct {
	spec     keys.Spec
	outcomes [protocol.CountDeadLetter + 1]prometheus.Counter // by protocol.Count
	reasons  map[keys.Reason]prometheus.Counter
	label    string
	m        *Metrics
}

func (s *sourceState) reason(r keys.Reason) prometheus.Counter {
	if c, ok := s.reasons[r]; ok {
		return c
	}
	return s.m.unkeyed.WithLabelValues(s.label, string(r))
}

// New checks cfg (after applying defaults) and returns a pipeline ready to Run. Errors start with "pipeline: " and
// name the field at fault.
func New(cfg Config) (*Pipeline, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{
		cfg:       cfg,
		js:        cfg.JetStream,
		nc:        cfg.JetStream.Conn(),
		apiPrefix: jsapi.Prefix(cfg.JetStream.Options()),
		epoch:     time.Now(),
		log:       cfg.Logger,
		m:         cfg.Metrics,
		sources:   make(map[string]*sourceState, len(cfg.Sources.Specs)),
	}
	for r := protocol.NakShutdown; r <= protocol.NakRecord; r++ {
		p.naks[r] = p.m.naks.WithLabelValues(r.String())
	}
	p.naks[0] = p.naks[protocol.NakWindow]
	p.inputKeeps.Store(true)
	p.holders = newHolders()
	p.decide = protocol.Decide
	p.maxHold.Store(int64(p.holdBound(cfg.OutputDuplicates)))
	for _, r := range []string{AckRefused, AckError, AckNoConsumer, AckUnconfirmed} {
		p.m.ackFailures.WithLabelValues(r)
	}
	newState := func(label string, spec keys.Spec) *sourceState {
		s := &sourceState{spec: spec, label: label, m: p.m, reasons: map[keys.Reason]prometheus.Counter{}}
		for c := protocol.CountUnique; c <= protocol.CountDeadLetter; c++ {
			s.outcomes[c] = p.m.envelopes.WithLabelValues(label, c.String())
		}
		for _, r := range contract.UnkeyedReasons() {
			s.reasons[keys.Reason(r)] = p.m.unkeyed.WithLabelValues(label, r)
		}
		return s
	}
	for id := range cfg.Sources.Specs {
		spec, _ := cfg.Sources.Lookup(id)
		p.sources[id] = newState(id, spec)
	}
	p.other = newState("other", keys.Spec{}) // undeclared sources, and subjects without one
	p.m.sourcesWithoutDedupe.Set(float64(len(cfg.Sources.WithoutDedupe)))
	p.m.ready.Set(0)
	return p, nil
}

func (p *Pipeline) source(id string) *sourceState {
	if s, ok := p.sources[id]; ok {
		return s
	}
	return p.other
}

// errNotRunning is Ready's answer before Run starts and after it returns.
var errNotRunning = errors.New("pipeline: not running")

// runState is what one Run shares with its consume handler and workers.
type runState struct {
	work     chan *delivery
	stopping chan struct{} // closed when Run's context is done: the handler hands back what it receives
	stopOnce sync.Once
	stopped  time.Time     // when stopping was closed: the shutdown's budget counts from it (read after stop)
	quit     chan struct{} // closed once consuming stopped: idle workers exit
	steps    shutdownSteps
}

func newRunState(shutdownTimeout time.Duration) *runState {
	return &runState{
		work:     make(chan *delivery),
		stopping: make(chan struct{}),
		quit:     make(chan struct{}),
		steps:    planShutdown(shutdownTimeout),
	}
}

// stop starts the shutdown, once: the moment it first runs is the one the budget counts from.
func (rs *runState) stop() {
	rs.stopOnce.Do(func() {
		rs.stopped = time.Now()
		close(rs.stopping)
	})
}

// until is the moment a shutdown step ends (after), counted from the stop, which it makes if none was made yet.
func (rs *runState) until(after time.Duration) time.Time {
	rs.stop()
	return rs.stopped.Add(after)
}

// handOver gives d to an idle worker, waiting for one, unless the run is stopping: false says hand it back (NAK).
// Stopping is checked first, on its own: a delivery that reaches the handler after the stop is never started, even
// with a worker idle (a select on both would pick either, at random).
func (rs *runState) handOver(d *delivery) bool {
	select {
	case <-rs.stopping:
		return false
	default:
	}
	select {
	case rs.work <- d:
		return true
	case <-rs.stopping:
		return false
	}
}

// shutdownSteps are the ends of the steps of a shutdown, counted from the stop (Run's context done).
type shutdownSteps struct {
	drain  time.Duration // the pull subscription's drain: deliveries the client still holds are handed back
	cancel time.Duration // in-flight work still running is cancelled: what is not stored yet is handed back
	end    time.Duration // Run returns, whether or not every worker has finished its shutdown-proof steps
}

// planShutdown decides the steps of a shutdown within budget (Config.ShutdownTimeout), as Run describes them. A
// budget of zero or less (none left) makes every step end at once, in order.
func planShutdown(budget time.Duration) shutdownSteps {
	budget = max(budget, 0)
	cancel := budget - min(5*time.Second, budget/4)
	return shutdownSteps{drain: min(5*time.Second, cancel), cancel: cancel, end: budget}
}

// Run consumes until ctx is cancelled (or the NATS connection is closed for good), then shuts down within
// ShutdownTimeout counted from the cancellation (planShutdown): it stops pulling, hands back what was pulled but not
// started (NAK), lets in-flight envelopes finish until all but min(5s, a quarter) of the budget has passed, then
// cancels them — what is not stored is handed back, never acknowledged; what is stored still sends its record,
// release and ack, each bounded by its own timeout — and returns when they are done or the budget is spent. A
// worker still busy then can only send a stored outcome's record, release and ack, or a NAK. With
// Config.Provision it first creates missing streams and the consumer, retrying while JetStream is unreachable or
// its cluster cannot place their replicas (readiness and a warning say why).
// Run returns nil after a cancellation; only one Run may be active at a time: another returns an error at once. A
// Run after one that returned with workers still busy waits for them first (or for ctx).
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("pipeline: Run is already running")
	}
	defer func() {
		p.running.Store(false)
		p.bound.Store(false)
		p.updateReady() // not running: 0, after any late change's call
	}()
	p.bindErr.Store(nil) // the previous Run's reason, which readiness would still give
	// A previous Run that spent its shutdown budget returned with workers still sending their stored outcomes'
	// record, release and ack: they use the answers subscription and the counters this Run would set up again.
	if prev := p.lastWorkers; prev != nil && !waitFor(prev, 0) {
		p.waitingLast.Store(true)
		p.log.Warn("pipeline: waiting for the previous Run's workers to finish their shutdown before consuming again")
		select {
		case <-prev:
			p.waitingLast.Store(false)
		case <-ctx.Done():
			p.waitingLast.Store(false)
			return nil
		}
	}

	// Status: consumer pending and window health, for metrics and Ready. Owned by Run, stopped last.
	bgCtx, bgCancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer func() { bgCancel(); bg.Wait() }()
	bg.Go(func() { p.statusLoop(bgCtx) })
	bg.Go(func() { p.pauseLoop(bgCtx) })

	// Acks and output publishes wait for their answers through one subscription of the run's own.
	req, err := natsreq.New(p.nc)
	if err != nil {
		return fmt.Errorf("pipeline: answers subscription: %w", err)
	}
	p.req = req
	defer func() { _ = req.Close() }()

	// The shutdown's budget counts from the cancellation, whatever Run is doing then.
	rs := newRunState(p.cfg.ShutdownTimeout)
	defer context.AfterFunc(ctx, rs.stop)()

	if p.cfg.Provision {
		if err := p.provision(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	_, _ = p.refreshStreams(ctx, nil, false) // the limits, at once (not bound yet); readiness follows the status poll

	// Workers run under workCtx, which outlives ctx by all but min(5s, a quarter) of ShutdownTimeout.
	workCtx, workCancel := context.WithCancel(context.Background())
	defer workCancel()
	var workers sync.WaitGroup
	for range p.cfg.MaxInFlight {
		workers.Go(func() { p.newWorker(workCtx).loop(rs) })
	}

	runErr := p.consume(ctx, rs)

	// Shutdown: pulling has stopped and the handler hands back anything it still receives.
	cancelAt, end := rs.until(rs.steps.cancel), rs.until(rs.steps.end)
	close(rs.quit)
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	p.lastWorkers = done
	if !waitFor(done, time.Until(cancelAt)) {
		workCancel() // before the log line: what reads it (a test) may rely on the cancellation having happened
		p.log.Warn("pipeline: shutdown timeout: handing back envelopes still in flight", "timeout", p.cfg.ShutdownTimeout,
			"cancelled_after", rs.steps.cancel)
		// Every blocking step of a worker selects on workCtx, and a window call is bounded by its own timeout: the
		// rest of the budget is for the stored outcomes' record, release and ack. Past it, do not wait: what a
		// worker does later is one of those, or a NAK.
		if !waitFor(done, time.Until(end)) {
			p.log.Error("pipeline: shutdown timeout: workers still busy after their cancellation; returning without them",
				"timeout", p.cfg.ShutdownTimeout)
		}
	}
	p.log.Info("pipeline: stopped")
	return runErr
}

func (p *Pipeline) provision(ctx context.Context) error {
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	stuckAfter := cmp.Or(p.cfg.placementStuckAfter, jserr.PlacementStuckAfter)
	var refusals jserr.Refusals
	for {
		got, err := provision(ctx, p.cfg, false)
		if err == nil {
			p.bindErr.Store(nil)
			p.seenConsumer.Store(&seenConsumer{created: got.consumer.UnixNano()}) // its warnings are logged: the bind does not repeat them
			p.outputCreated(got.output)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		stop, reason := provisionFailed(err)
		if stop {
			return err
		}
		p.bindErr.Store(&reason) // readiness: not consuming, and why (the latest failure, not an earlier one)
		lasted := refusals.Lasted(jserr.NoPlacement(err), time.Now(), stuckAfter)
		if perr := (*jserr.PlacementError)(nil); errors.As(err, &perr) {
			p.log.Warn(err.Error()) // names the causes and the setting
			if lasted {
				p.log.Error(perr.Lasted(stuckAfter), "setting", perr.Setting(), "err", err)
			}
		} else {
			p.log.Warn("pipeline: provisioning failed; retrying", "err", err)
		}
		if !bo.Sleep(ctx) {
			return nil
		}
	}
}

// provisionFailed decides what a failed provisioning attempt does: stop the start (the server's definite answer,
// or a configuration that cannot work), or wait and retry what may go away by itself (no responders, timeouts, a
// server without a leader yet), reason being why readiness says the pipeline does not consume. The cluster's
// refusal to place a stream (a 400) is retried: it passes by itself (a server offline or not yet known) or needs a
// setting changed, which its error says, and the start waits as for an unavailable JetStream. Each failure replaces
// the previous one's reason, so a refusal followed by a timeout gives the timeout.
func provisionFailed(err error) (stop bool, reason error) {
	switch {
	case jserr.NoPlacement(err):
		return false, err
	case errors.Is(err, ErrIncompatible), errors.Is(err, ErrConsumerStart), jserr.Refused(err):
		return true, nil
	}
	return false, fmt.Errorf("provisioning failed, retrying: %w", err)
}
