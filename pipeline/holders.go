package pipeline

import (
	"sync"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// holders knows the claims this process's own workers hold, and the last ones they finished, so that a copy that
// finds its key claimed by an envelope of this replica waits for it in memory, and a copy of an event this replica
// published a moment ago is acknowledged at once. Copies of one event often arrive together, so most waits end
// here. It is only a shortcut: whatever it does not know is decided through the window and the input stream.
type holders struct {
	mu   sync.Mutex
	m    map[string]*holding
	ring []string // keys of finished, published holdings, oldest first once full
	next int
}

// holding is one envelope holding one key's claim in this process. Its fields after seq and stamp are written
// under holders.mu, and read under it or once the channel wait returned.
type holding struct {
	seq   uint64
	stamp int64
	// expires (p.clock) is no later than the claim's TTL runs out: the claim began before it was written.
	expires  time.Duration
	finished bool
	// done is made by the first copy that waits (most holdings have none: a channel for each would be a third of
	// the bookkeeping's cost) and closed when the holder finishes.
	done chan struct{}
	// published, once finished: the event is stored in the output. False: handed back or dead-lettered.
	published bool
	// rev, once finished: the revision of the holder's last write on the key, 0 when unknown.
	rev uint64
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

const finishedHoldings = 4096

func newHolders() *holders {
	return &holders{m: make(map[string]*holding), ring: make([]string, 0, finishedHoldings)}
}

func holderKey(tenant, source, key string) string {
	return tenant + "\x00" + source + "\x00" + key
}

// begin records that the envelope (seq, stamp) holds k's claim here, until expires (p.clock) at the latest.
func (h *holders) begin(k string, seq uint64, stamp int64, expires time.Duration) *holding {
	hd := &holding{seq: seq, stamp: stamp, expires: expires}
	h.mu.Lock()
	h.m[k] = hd
	h.mu.Unlock()
	return hd
}

func (h *holders) finish(k string, hd *holding, published bool, rev uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd.published, hd.rev, hd.finished = published, rev, true
	if hd.done != nil {
		close(hd.done)
	}
	if h.m[k] != hd {
		return // a later holder of the key (another delivery of the envelope) took its place
	}
	if !published {
		delete(h.m, k)
		return
	}
	if len(h.ring) < finishedHoldings {
		h.ring = append(h.ring, k)
		return
	}
	old := h.ring[h.next]
	if o := h.m[old]; o != nil && old != k && o.finished { // not held again meanwhile
		delete(h.m, old)
	}
	h.ring[h.next] = k
	h.next = (h.next + 1) % finishedHoldings
}

// lookup returns this process's holding of k by the envelope (seq, stamp), or nil, and the channel closed once
// it is finished (its published field may be read then).
func (h *holders) lookup(k string, seq uint64, stamp int64) (*holding, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd := h.m[k]
	if hd == nil || hd.seq != seq || hd.stamp != stamp {
		return nil, nil
	}
	if hd.finished {
		return hd, closedChan
	}
	if hd.done == nil {
		hd.done = make(chan struct{})
	}
	return hd, hd.done
}

// known is what a claim of k may be decided by without a read at now (p.clock): the last finished, published
// holding of k here (kvwindow.Known), while its claim's TTL runs; past it, a key still at that revision can only be
// a re-created bucket's, matching by chance.
func (h *holders) known(k string, now time.Duration) kvwindow.Known {
	h.mu.Lock()
	defer h.mu.Unlock()
	// A holding still being decided is left to the claim's answer and the wait in memory.
	hd := h.m[k]
	if hd == nil || !hd.finished || !hd.published || hd.rev == 0 || now >= hd.expires {
		return kvwindow.Known{}
	}
	return kvwindow.Known{Revision: hd.rev, Claimant: kvwindow.Claimant{Seq: hd.seq, Stamp: hd.stamp}}
}
