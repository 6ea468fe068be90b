package pipeline

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
)

// The pipeline pulls from its consumer itself rather than through the jetstream package's Consume, which tells a
// delivery from a server status message by its shape alone (an empty body and a Status header): an envelope of
// that shape would be dropped or stop the loop, never acknowledged, and starve every tenant of a work-queue stream.
// Here a message is a delivery exactly when its reply subject is an ack subject, set on no status message.

// errConsumerDeleted ends a pull subscription whose consumer the server reports deleted.
var errConsumerDeleted = errors.New("pipeline: the consumer was deleted")

// pullHealth is what the consumer's answers to the pull requests say, kept across pull subscriptions for
// readiness: a consumer that refuses or drops every request leaves the pipeline unable to consume.
type pullHealth struct {
	answered atomic.Int64            // p.clock() of the last sign a request was accepted: a delivery, a heartbeat, an expiry
	refusal  atomic.Pointer[failure] // the last refusal (nil: none since the pipeline started)
	busy     atomic.Bool             // the handler is running: silence meanwhile is ours, not the server's
	limits   atomic.Pointer[consumerLimits]
	bound    atomic.Int64 // pullStuckAfter of the pull requests' heartbeat (ns)
}

// restart starts the count afresh: the requests are sent again (a new run, a reconnect, a new binding).
func (h *pullHealth) restart(now time.Duration) { h.answered.Store(int64(now)) }

// stuck is readiness's view of the pulls (nil: fine).
func (h *pullHealth) stuck(now time.Duration) error {
	if h.bound.Load() == 0 {
		return nil // no pull subscription yet
	}
	var l consumerLimits
	if lp := h.limits.Load(); lp != nil {
		l = *lp
	}
	return pullsStuck(now, time.Duration(h.answered.Load()), h.busy.Load(), h.refusal.Load(), time.Duration(h.bound.Load()), l)
}

// pullSub is one pull subscription on the consumer. It keeps up to batch deliveries requested: a new request for
// what is missing whenever half the batch has arrived or expired, and a fresh start whenever the server has been
// silent for two heartbeats (it forgot the requests). Its requests are cut down to the consumer's limits.
type pullSub struct {
	p       *Pipeline
	nc      *nats.Conn
	next    string // the consumer's "next messages" API subject
	inbox   string
	handle  func(*delivery)
	sub     *nats.Subscription
	closed  chan struct{} // closed when the subscription is gone (stopped, drained, or the connection closed)
	failed  chan error    // one terminal error: the consumer deleted
	stopped chan struct{} // stops the heartbeat watch
	stopper sync.Once
	closer  sync.Once

	mu      sync.Mutex
	pending int // deliveries requested and neither received nor expired
	limits  consumerLimits
	shape   pullShape

	lastSeen atomic.Int64 // p.clock() of the last message from the server, or of the end of the last handler call
	refusals rateLog
}

func (p *Pipeline) newPullSub(handle func(*delivery), limits consumerLimits) (*pullSub, error) {
	s := &pullSub{
		p:       p,
		nc:      p.nc,
		next:    p.apiPrefix + "CONSUMER.MSG.NEXT." + p.cfg.InputStream + "." + p.cfg.Consumer,
		inbox:   p.nc.NewInbox(),
		handle:  handle,
		closed:  make(chan struct{}),
		failed:  make(chan error, 1),
		stopped: make(chan struct{}),
	}
	s.setLimits(limits, "")
	sub, err := p.nc.Subscribe(s.inbox, s.onMsg)
	if err != nil {
		return nil, err
	}
	// Deliveries wait here while every worker is busy; the batch bounds how many the server sends.
	_ = sub.SetPendingLimits(-1, -1)
	sub.SetClosedHandler(func(string) { s.closer.Do(func() { close(s.closed) }) })
	s.sub = sub
	s.lastSeen.Store(int64(p.clock()))
	s.request(0)
	go s.watch()
	return s, nil
}

// setLimits cuts the requests sent from now on down to the consumer's limits l (from its configuration, or from a
// refusal: why) and logs what changed.
func (s *pullSub) setLimits(l consumerLimits, why string) {
	p := s.p
	shape, clamped := shapePull(p.cfg.MaxInFlight, p.cfg.AckWait, l)
	s.mu.Lock()
	first := s.shape.batch == 0
	changed := shape != s.shape
	s.limits, s.shape = l, shape
	s.mu.Unlock()
	p.pulls.limits.Store(&l)
	p.pulls.bound.Store(int64(pullStuckAfter(shape.heartbeat)))
	if !changed {
		return
	}
	args := []any{"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "batch", shape.batch, "expiry", shape.expiry,
		"heartbeat", shape.heartbeat}
	if why != "" {
		args = append(args, "refusal", why)
	}
	switch {
	case first && clamped != "":
		p.log.Info("pipeline: pull requests cut down to the consumer's limits: "+clamped, args...)
	case clamped != "":
		p.log.Warn("pipeline: pull requests cut down to the consumer's limits: "+clamped, args...)
	case !first:
		p.log.Info("pipeline: pull requests follow the consumer's limits", args...)
	}
}

func (s *pullSub) heartbeat() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shape.heartbeat
}

func (s *pullSub) accepted() { s.p.pulls.answered.Store(int64(s.p.clock())) }

// refused records a refusal of the requests, for readiness to report once it persists.
func (s *pullSub) refused(err error) { s.p.pulls.refusal.Store(&failure{err: err, at: s.p.clock()}) }

func (s *pullSub) onMsg(m *nats.Msg) {
	s.lastSeen.Store(int64(s.p.clock()))
	if strings.HasPrefix(m.Reply, ackPrefix) {
		s.accepted()
		s.request(1)
		stream, delivered, seq, stamp, ok := parseAckSubject(m.Reply)
		if !ok {
			s.p.log.Error("pipeline: delivery with an unreadable ack subject; left for redelivery", "reply", m.Reply, "subject", m.Subject)
			return
		}
		s.p.pulls.busy.Store(true)
		s.handle(&delivery{msg: m, at: s.p.clock(), stream: stream, seq: seq, delivered: delivered, stamp: stamp})
		s.p.pulls.busy.Store(false)
		s.lastSeen.Store(int64(s.p.clock()))
		s.accepted() // the time spent handing it over was ours
		return
	}
	s.status(m)
}

func (s *pullSub) status(m *nats.Msg) {
	code := m.Header.Get(contract.NATSStatus)
	descr := m.Header.Get(contract.NATSDescription)
	switch code {
	case "100": // idle heartbeat
		s.accepted()
		return
	case "404", "408": // a request expired (or found nothing): what it did not deliver is no longer requested
		s.accepted()
		n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages"))
		if err != nil || n <= 0 {
			n = allRequested
		}
		s.request(n)
	case "409":
		lower := strings.ToLower(descr)
		switch {
		case strings.Contains(lower, "consumer deleted"):
			s.fail(errConsumerDeleted)
		case strings.Contains(lower, "leadership change"), strings.Contains(lower, "server shutdown"):
			s.p.log.Debug("pipeline: pull requests ended by the server; pulling again", "status", code, "description", descr)
			s.request(allRequested)
		default:
			s.refusedNow(code, descr)
		}
	case "503": // no responders: the consumer has no leader (yet), or is gone (the status poll tells which and binds
		// again); the heartbeat check pulls again
		s.refused(errors.New("503 no responders: the consumer has no leader, or was deleted"))
		s.mu.Lock()
		s.pending = 0
		s.mu.Unlock()
	default:
		s.refusedNow(code, descr)
	}
}

// refusedNow handles a refused request. A refusal that names a limit (edited since the last status poll) cuts the
// requests down to it at once; any other is tried again on the next heartbeat check (binding again would only
// repeat it), and readiness reports it once it persists.
func (s *pullSub) refusedNow(code, descr string) {
	p := s.p
	if ok, n := s.refusals.allow(); ok {
		p.log.Warn("pipeline: pull request refused by the server", "status", code, "description", descr,
			"stream", p.cfg.InputStream, "consumer", p.cfg.Consumer, "refusals_since_last_log", n)
	}
	s.refused(fmt.Errorf("%s (nats consumer info %s %s)", strings.TrimSpace(code+" "+descr), p.cfg.InputStream, p.cfg.Consumer))
	s.mu.Lock()
	s.pending = 0
	l, named := limitFromRefusal(descr, s.limits)
	s.mu.Unlock()
	if named {
		s.setLimits(l, descr)
		s.request(allRequested)
	}
}

// topUp requests what is missing from the batch once half of it has arrived or expired. Called with s.mu held.
func (s *pullSub) topUp() {
	sh := &s.shape
	if s.pending > sh.batch/2 || sh.single && s.pending > 0 || !s.nc.IsConnected() {
		return
	}
	n := sh.batch - s.pending
	req := make([]byte, 0, 96)
	req = append(req, `{"batch":`...)
	req = strconv.AppendInt(req, int64(n), 10)
	req = append(req, `,"expires":`...)
	req = strconv.AppendInt(req, int64(sh.expiry), 10)
	req = append(req, `,"idle_heartbeat":`...)
	req = strconv.AppendInt(req, int64(sh.heartbeat), 10)
	req = append(req, '}')
	if err := s.nc.PublishRequest(s.next, s.inbox, req); err != nil {
		s.p.log.Debug("pipeline: pull request not sent", "err", err)
		return
	}
	s.pending += n
}

// request forgets got deliveries of the outstanding requests (allRequested: every one) and tops them up.
func (s *pullSub) request(got int) {
	s.mu.Lock()
	s.pending = max(s.pending-got, 0)
	s.topUp()
	s.mu.Unlock()
}

// allRequested makes request forget every outstanding request: the server no longer holds them.
const allRequested = math.MaxInt

// watch pulls again when the server has been silent for two heartbeats while no handler call was running.
func (s *pullSub) watch() {
	hb := s.heartbeat()
	t := time.NewTicker(hb)
	defer t.Stop()
	// A reconnect loses every pull request the server held for us: pull again at once rather than after two
	// missed heartbeats.
	reconnected := s.nc.StatusChanged(nats.CONNECTED)
	defer s.nc.RemoveStatusListener(reconnected)
	for {
		select {
		case <-s.stopped:
			return
		case <-s.closed:
			return
		case <-reconnected:
			s.lastSeen.Store(int64(s.p.clock()))
			s.request(allRequested)
			continue
		case <-t.C:
		}
		if now := s.heartbeat(); now != hb {
			hb = now
			t.Reset(hb)
		}
		if s.p.pulls.busy.Load() || !s.nc.IsConnected() {
			continue
		}
		if silent := s.p.clock() - time.Duration(s.lastSeen.Load()); silent > 2*hb {
			s.p.log.Debug("pipeline: no heartbeat from the consumer; pulling again", "silent", silent.Round(time.Millisecond))
			s.lastSeen.Store(int64(s.p.clock()))
			s.request(allRequested)
			continue
		}
		s.request(0) // after a refusal or a "no responders"
	}
}

func (s *pullSub) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// stop ends the subscription at once: deliveries buffered in the client are dropped (redelivered).
func (s *pullSub) stop() {
	s.stopper.Do(func() { close(s.stopped) })
	_ = s.sub.Unsubscribe()
}

// drain ends the subscription after the deliveries already buffered have gone through the handler (which hands
// them back at shutdown), waiting at most d.
func (s *pullSub) drain(d time.Duration) {
	s.stopper.Do(func() { close(s.stopped) })
	if err := s.sub.Drain(); err != nil || !waitFor(s.closed, d) {
		_ = s.sub.Unsubscribe()
	}
}
