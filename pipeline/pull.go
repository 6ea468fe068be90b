package pipeline

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// The pipeline pulls from its consumer itself rather than through the jetstream package's Consume. The client
// library tells a delivery from a server status message by its shape alone — an empty body and a Status header —
// so an envelope of that shape (any publisher to the input subjects can send one) is dropped or stops the consume
// loop, is never acknowledged and, stored in a work-queue stream, starves every tenant on each redelivery. Here a
// message is a delivery exactly when its reply subject is an ack subject ($JS.ACK.…), which the server sets on
// every delivery and on no status message; the handler then deals with such an envelope like any other.

// errConsumerDeleted ends a pull subscription whose consumer the server reports deleted.
var errConsumerDeleted = errors.New("pipeline: the consumer was deleted")

// pullSub is one pull subscription on the consumer. It keeps up to batch deliveries requested: a new request for
// what is missing whenever half the batch has arrived or expired, and a fresh start whenever the server has been
// silent for two heartbeats (a leader change, a restart, a reconnect: the server forgot the requests).
type pullSub struct {
	p       *Pipeline
	nc      *nats.Conn
	next    string // the consumer's "next messages" API subject
	inbox   string
	batch   int
	expiry  time.Duration
	hb      time.Duration
	handle  func(*delivery)
	sub     *nats.Subscription
	closed  chan struct{} // closed when the subscription is gone (stopped, drained, or the connection closed)
	failed  chan error    // one terminal error: the consumer deleted, a request the server refuses
	stopped chan struct{} // stops the heartbeat watch
	stopper sync.Once
	closer  sync.Once

	mu      sync.Mutex
	pending int // deliveries requested and neither received nor expired

	lastSeen atomic.Int64 // p.clock() of the last message from the server, or of the end of the last handler call
	busy     atomic.Bool  // the handler is running: silence meanwhile is ours, not the server's
}

func (p *Pipeline) newPullSub(handle func(*delivery)) (*pullSub, error) {
	expiry, hb := pullTimes(p.cfg.AckWait)
	s := &pullSub{
		p:       p,
		nc:      p.nc,
		next:    p.apiPrefix + "CONSUMER.MSG.NEXT." + p.cfg.InputStream + "." + p.cfg.Consumer,
		inbox:   p.nc.NewInbox(),
		batch:   p.cfg.MaxInFlight,
		expiry:  expiry,
		hb:      hb,
		handle:  handle,
		closed:  make(chan struct{}),
		failed:  make(chan error, 1),
		stopped: make(chan struct{}),
	}
	sub, err := p.nc.Subscribe(s.inbox, s.onMsg)
	if err != nil {
		return nil, err
	}
	// Deliveries wait here while every worker is busy; the batch bounds how many the server sends.
	_ = sub.SetPendingLimits(-1, -1)
	sub.SetClosedHandler(func(string) { s.closer.Do(func() { close(s.closed) }) })
	s.sub = sub
	s.lastSeen.Store(int64(p.clock()))
	s.mu.Lock()
	s.topUp()
	s.mu.Unlock()
	go s.watch()
	return s, nil
}

func (s *pullSub) onMsg(m *nats.Msg) {
	s.lastSeen.Store(int64(s.p.clock()))
	if strings.HasPrefix(m.Reply, ackPrefix) {
		s.mu.Lock()
		s.pending = max(s.pending-1, 0)
		s.topUp()
		s.mu.Unlock()
		stream, delivered, seq, stamp, ok := parseAckSubject(m.Reply)
		if !ok {
			s.p.log.Error("pipeline: delivery with an unreadable ack subject; left for redelivery", "reply", m.Reply, "subject", m.Subject)
			return
		}
		s.busy.Store(true)
		s.handle(&delivery{msg: m, at: s.p.clock(), stream: stream, seq: seq, delivered: delivered, stamp: stamp})
		s.busy.Store(false)
		s.lastSeen.Store(int64(s.p.clock()))
		return
	}
	s.status(m)
}

// status handles what the server says about our pull requests.
func (s *pullSub) status(m *nats.Msg) {
	code := m.Header.Get(statusHeader)
	descr := m.Header.Get(descriptionHeader)
	switch code {
	case "100": // idle heartbeat
		return
	case "404", "408": // a request expired (or found nothing): what it did not deliver is no longer requested
		s.mu.Lock()
		if n, err := strconv.Atoi(m.Header.Get("Nats-Pending-Messages")); err == nil && n > 0 {
			s.pending = max(s.pending-n, 0)
		} else {
			s.pending = 0
		}
		s.topUp()
		s.mu.Unlock()
	case "409":
		lower := strings.ToLower(descr)
		switch {
		case strings.Contains(lower, "consumer deleted"):
			s.fail(errConsumerDeleted)
		case strings.Contains(lower, "leadership change"), strings.Contains(lower, "server shutdown"):
			s.p.log.Debug("pipeline: pull requests ended by the server; pulling again", "status", code, "description", descr)
			s.restart()
		default:
			// Exceeded MaxWaiting, MaxRequestBatch and the like: the request was refused; try again on the next
			// heartbeat check rather than at once.
			s.p.log.Warn("pipeline: pull request refused by the server", "status", code, "description", descr)
			s.mu.Lock()
			s.pending = 0
			s.mu.Unlock()
		}
	case "503": // no responders: the consumer has no leader (yet); the heartbeat check pulls again
		s.mu.Lock()
		s.pending = 0
		s.mu.Unlock()
	default:
		s.fail(errors.New("pipeline: pull request refused: " + strings.TrimSpace(code+" "+descr)))
	}
}

// topUp requests what is missing from the batch once half of it has arrived or expired. Called with s.mu held.
func (s *pullSub) topUp() {
	if s.pending > s.batch/2 || !s.nc.IsConnected() {
		return
	}
	n := s.batch - s.pending
	req := make([]byte, 0, 96)
	req = append(req, `{"batch":`...)
	req = strconv.AppendInt(req, int64(n), 10)
	req = append(req, `,"expires":`...)
	req = strconv.AppendInt(req, int64(s.expiry), 10)
	req = append(req, `,"idle_heartbeat":`...)
	req = strconv.AppendInt(req, int64(s.hb), 10)
	req = append(req, '}')
	if err := s.nc.PublishRequest(s.next, s.inbox, req); err != nil {
		s.p.log.Debug("pipeline: pull request not sent", "err", err)
		return
	}
	s.pending += n
}

// restart forgets every outstanding request and requests a whole batch.
func (s *pullSub) restart() {
	s.mu.Lock()
	s.pending = 0
	s.topUp()
	s.mu.Unlock()
}

// watch pulls again when the server has been silent for two heartbeats while no handler call was running.
func (s *pullSub) watch() {
	t := time.NewTicker(s.hb)
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
			s.restart()
			continue
		case <-t.C:
		}
		if s.busy.Load() || !s.nc.IsConnected() {
			continue
		}
		if silent := s.p.clock() - time.Duration(s.lastSeen.Load()); silent > 2*s.hb {
			s.p.log.Debug("pipeline: no heartbeat from the consumer; pulling again", "silent", silent.Round(time.Millisecond))
			s.lastSeen.Store(int64(s.p.clock()))
			s.restart()
			continue
		}
		s.mu.Lock()
		s.topUp() // after a refusal or a "no responders"
		s.mu.Unlock()
	}
}

func (s *pullSub) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// stop ends the subscription at once: deliveries buffered in the client are dropped (redelivered after the ack
// wait).
func (s *pullSub) stop() {
	s.stopper.Do(func() { close(s.stopped) })
	_ = s.sub.Unsubscribe()
}

// drain ends the subscription after the deliveries already buffered have gone through the handler (which hands
// them back at shutdown), waiting at most d.
func (s *pullSub) drain(d time.Duration) {
	s.stopper.Do(func() { close(s.stopped) })
	if err := s.sub.Drain(); err != nil {
		_ = s.sub.Unsubscribe()
		return
	}
	if !waitFor(s.closed, d) {
		_ = s.sub.Unsubscribe()
	}
}
