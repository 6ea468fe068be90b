// Package natsreq sends requests over a core NATS connection and matches each answer to its request as it
// arrives, at a cost per request that the hot path of the worker can afford: claims, acks that wait for the
// server's confirmation, and the answers' parsing.
//
// A request borrows a slot: a reply subject reserved for it (one wildcard subscription serves every slot), a
// one-message channel and a timer, all reused (why not nats.go's own request path: docs/adr/0005-answer-mux.md). A
// slot whose request was sent gets a new reply subject before it is used again: an answer that comes late (after a
// timeout or a cancelled context), or comes again (a responder answering twice, a stream answering from its old and
// its new leader), can never be taken for the answer to a later request.
//
// The answer subscription lives as long as the connection (as nats.go's own response subscription does) unless
// Close ends it; it follows the connection through reconnects.
package natsreq

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
)

// Mux matches answers to requests. It is safe for concurrent use.
type Mux struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	prefix string // the reply subjects' common prefix, ending in "."

	mu    sync.RWMutex
	slots map[uint64]*slot // every slot with a request under way, by its reply subject's index: the answer handler's lookup
	free  []*slot          // slots waiting for a request, without a reply subject
	next  uint64           // the next reply subject's index
	made  int              // slots made

	// Reply subjects are made subjectBlock at a time in one string (every sent request takes a new one: one
	// allocation each would be a tenth of the worker's allocations): block holds the subjects of the indexes from
	// blockStart, ends[k] is where the k-th ends. A subject keeps its whole block alive, so only slots with a
	// request under way hold one (taken at acquire, given up when the request ends): those were all taken lately,
	// from the newest blocks, however many idle slots a burst left behind.
	block      string
	blockStart uint64
	ends       [subjectBlock]int
}

const subjectBlock = 256

type slot struct {
	idx   uint64
	reply string
	ch    chan *nats.Msg
	timer *time.Timer
}

// New subscribes to the answers of the requests m will send on nc, under an inbox of nc's (its custom inbox
// prefix respected).
func New(nc *nats.Conn) (*Mux, error) {
	if nc == nil {
		return nil, errors.New("natsreq: connection must not be nil")
	}
	m := &Mux{nc: nc, prefix: nc.NewInbox() + ".", slots: make(map[uint64]*slot)}
	sub, err := nc.Subscribe(m.prefix+"*", m.answer)
	if err != nil {
		return nil, err
	}
	// Answers are small and every request bounds its wait: a slow reader drops answers (their requests time
	// out, which every caller treats as "not confirmed"), it never holds them without limit.
	if err := sub.SetPendingLimits(1<<20, 64<<20); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	m.sub = sub
	return m, nil
}

// Close ends the answer subscription; requests still waiting then time out.
func (m *Mux) Close() error {
	return m.sub.Unsubscribe()
}

func (m *Mux) answer(msg *nats.Msg) {
	idx, err := strconv.ParseUint(msg.Subject[min(len(m.prefix), len(msg.Subject)):], 10, 64)
	if err != nil {
		return
	}
	m.mu.RLock()
	s := m.slots[idx]
	if s != nil {
		select {
		case s.ch <- msg:
		default: // a second answer to one request: the first one counts
		}
	}
	m.mu.RUnlock()
}

// acquire takes a free slot (or makes one) under a reply subject never used before.
func (m *Mux) acquire() *slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s *slot
	if n := len(m.free); n > 0 {
		s = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		s = &slot{ch: make(chan *nats.Msg, 1), timer: time.NewTimer(time.Hour)}
		s.timer.Stop()
		m.made++
	}
	s.idx = m.next
	m.next++
	s.reply = m.subject(s.idx)
	m.slots[s.idx] = s
	return s
}

// renew hands back a slot (its request sent or not); its next request takes a new reply subject, so an answer to the
// old one (late, or a second one) finds no slot. The answer handler sends while it holds the read lock, so once
// the old subject is gone under the write lock nothing more can arrive for it, and what did arrive is drained
// before the slot is used again.
func (m *Mux) renew(s *slot) {
	s.timer.Stop()
	m.mu.Lock()
	delete(m.slots, s.idx)
	s.reply = ""
	select {
	case <-s.ch:
	default:
	}
	m.free = append(m.free, s)
	m.mu.Unlock()
}

// subject is the reply subject of index idx, the one after the last one made (m.next-1). Called with m.mu held.
func (m *Mux) subject(idx uint64) string {
	k := idx - m.blockStart
	if m.block == "" || k >= subjectBlock {
		var b strings.Builder // String() hands over its bytes: the block is the only allocation
		b.Grow(subjectBlock * (len(m.prefix) + 20))
		var num [20]byte
		for j := range uint64(subjectBlock) {
			b.WriteString(m.prefix)
			b.Write(strconv.AppendUint(num[:0], idx+j, 10))
			m.ends[j] = b.Len()
		}
		m.block, m.blockStart, k = b.String(), idx, 0
	}
	start := 0
	if k > 0 {
		start = m.ends[k-1]
	}
	return m.block[start:m.ends[k]]
}

// Request publishes msg with a reply subject of its own (msg.Reply is set for the send and cleared once it is
// written; msg may be reused once Request returns) and waits for the answer, at most timeout and no longer than
// ctx. A "no responders" answer is nats.ErrNoResponders; no answer in time is nats.ErrTimeout (ctx's error when
// ctx ended first).
func (m *Mux) Request(ctx context.Context, msg *nats.Msg, timeout time.Duration) (*nats.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := m.acquire()
	msg.Reply = s.reply
	err := m.nc.PublishMsg(msg)
	msg.Reply = "" // msg is the caller's again, holding nothing of the mux (the subject's block)
	if err != nil {
		m.renew(s)
		return nil, err
	}
	s.timer.Reset(timeout)
	select {
	case a := <-s.ch:
		// Go ≥ 1.23: the stopped timer's channel holds nothing stale for the next Reset. A second answer to this
		// request may still come: the slot goes on under a new subject.
		m.renew(s)
		if noResponders(a) {
			return nil, nats.ErrNoResponders
		}
		return a, nil
	case <-s.timer.C:
		m.renew(s)
		return nil, nats.ErrTimeout
	case <-ctx.Done():
		m.renew(s)
		return nil, ctx.Err()
	}
}

// noResponders reports the server's 503 status answer: nobody listens on the request's subject.
func noResponders(a *nats.Msg) bool {
	return len(a.Data) == 0 && a.Header != nil && a.Header.Get(contract.NATSStatus) == "503"
}
