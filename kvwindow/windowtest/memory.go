// Package windowtest helps test code that uses a claim window: Memory is an in-memory window with the same claim
// semantics as kvwindow.Window, and Run is a conformance suite that any window implementation must pass.
package windowtest

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// Claimer is what the conformance suite exercises.
type Claimer interface {
	Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error)
	Release(ctx context.Context, c kvwindow.Claim, rev uint64, mayBeStored bool) (bool, error)
	MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, firstClaimed time.Time) (uint64, bool, error)
	Get(ctx context.Context, tenant, source, key string) (kvwindow.Entry, bool, error)
}

type scopeKey struct{ tenant, source, key string }

// memEntry is what a key holds: a claim, or (released) a release marker naming its claimant. mayBeStored: the
// marker says the event may be stored (on a claim: it was made over such a marker).
type memEntry struct {
	kvwindow.Entry
	released, mayBeStored bool
}

// Memory is an in-memory claim window, safe for concurrent use. Claims expire after their TTL (rounded up to whole
// seconds, as the real window does) by the clock given to SetClock (time.Now by default). Revisions grow by one for
// every claim made or taken over, like stream sequences.
type Memory struct {
	mu          sync.Mutex
	now         func() time.Time
	rev         uint64
	entries     map[scopeKey]memEntry
	unavailable bool
	claims      int
}

// NewMemory returns an empty window using the real clock.
func NewMemory() *Memory {
	return &Memory{now: time.Now, entries: make(map[scopeKey]memEntry)}
}

// SetClock replaces the clock (nil restores time.Now). Use it to expire claims without waiting.
func (m *Memory) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	m.now = now
}

// SetUnavailable makes every later call fail (true) with an error wrapping kvwindow.ErrUnavailable, or work again
// (false). Claims held are kept.
func (m *Memory) SetUnavailable(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unavailable = down
}

// Claims is the number of Claim calls that reached a decision (Won, Owned, Duplicate or Stale).
func (m *Memory) Claims() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims
}

// Len is the number of live claims.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	n := 0
	for _, e := range m.entries {
		if now.Before(e.ExpiresAt()) {
			n++
		}
	}
	return n
}

var errDown = fmt.Errorf("%w: windowtest: memory window set unavailable", kvwindow.ErrUnavailable)

// lock takes mu for a call whose arguments' check gave invalid, unless that or the window failed (then mu is not
// held). The caller unlocks.
func (m *Memory) lock(ctx context.Context, invalid error) error {
	if invalid != nil {
		return invalid
	}
	m.mu.Lock()
	err := ctx.Err()
	switch {
	case err != nil:
		err = fmt.Errorf("%w: %w", kvwindow.ErrUnavailable, err)
	case m.unavailable:
		err = errDown
	}
	if err != nil {
		m.mu.Unlock()
	}
	return err
}

// claimOf returns the live claim for k (not a release marker). Caller holds mu.
func (m *Memory) claimOf(k scopeKey) (memEntry, bool) {
	e, ok := m.live(k)
	return e, ok && !e.released
}

// live returns the live entry for k (a claim or a release marker), dropping an expired one. Caller holds mu.
func (m *Memory) live(k scopeKey) (memEntry, bool) {
	e, ok := m.entries[k]
	if ok && !m.now().Before(e.ExpiresAt()) {
		delete(m.entries, k)
		ok = false
	}
	return e, ok
}

// Claim records c as in kvwindow.Window.Claim. It decides without known: the shortcut only spares the real
// window a read, and the answer is the same.
func (m *Memory) Claim(ctx context.Context, c kvwindow.Claim, _ kvwindow.Known) (kvwindow.Outcome, error) {
	if err := m.lock(ctx, c.Validate()); err != nil {
		return kvwindow.Outcome{}, err
	}
	defer m.mu.Unlock()
	m.claims++
	k := scopeKey{c.Tenant, c.Source, c.Key}
	status := kvwindow.Won
	published, mayBeStored := false, false
	first := m.now().Truncate(time.Millisecond) // the real window records milliseconds
	if e, ok := m.live(k); ok && e.released {
		if e.Claimant == c.Claimant {
			return kvwindow.Outcome{Status: kvwindow.DeadLettered, Revision: e.Revision}, nil
		}
		mayBeStored = e.mayBeStored // another envelope's release marker: claim over it
	} else if ok {
		if e.Claimant != c.Claimant {
			return kvwindow.Outcome{Status: kvwindow.Duplicate, Revision: e.Revision, Published: e.Published,
				FirstClaimed: e.FirstClaimed, HolderSeq: e.Claimant.Seq, HolderStamp: e.Claimant.Stamp}, nil
		}
		switch {
		case e.Delivery == c.Delivery:
			return kvwindow.Outcome{Status: kvwindow.Owned, Revision: e.Revision, Published: e.Published, FirstClaimed: e.FirstClaimed, MayBeStored: e.mayBeStored}, nil
		case c.Delivery.Before(e.Delivery):
			return kvwindow.Outcome{Status: kvwindow.Stale, Revision: e.Revision, FirstClaimed: e.FirstClaimed}, nil
		}
		// A later delivery takes the claim over: a new revision and the full TTL from now, as the real window's
		// rewrite of the claim, which keeps the first claim time and the record of a publish.
		status, published, first, mayBeStored = kvwindow.Owned, e.Published, e.FirstClaimed, e.mayBeStored
	}
	rev := m.put(c, memEntry{Entry: kvwindow.Entry{Published: published, FirstClaimed: first}, mayBeStored: mayBeStored})
	return kvwindow.Outcome{Status: status, Revision: rev, Published: published, FirstClaimed: first, MayBeStored: mayBeStored}, nil
}

// put stores e as c's write on its key: c's claimant and delivery, a new revision, c's TTL from now. Caller holds mu.
func (m *Memory) put(c kvwindow.Claim, e memEntry) uint64 {
	m.rev++
	e.Tenant, e.Source, e.Key, e.Claimant, e.Delivery = c.Tenant, c.Source, c.Key, c.Claimant, c.Delivery
	e.Revision, e.ClaimedAt, e.TTL = m.rev, m.now(), time.Duration(c.TTLSeconds())*time.Second
	m.entries[scopeKey{c.Tenant, c.Source, c.Key}] = e
	return m.rev
}

// validRev checks the arguments of a write expected at rev.
func validRev(c kvwindow.Claim, rev uint64) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if rev == 0 {
		return fmt.Errorf("%w: revision: must not be 0", kvwindow.ErrInvalid)
	}
	return nil
}

// MarkPublished records that c's event was published while the claim is still revision rev, as
// kvwindow.Window.MarkPublished (a new revision, returned, and the full TTL from now; the first claim time kept).
func (m *Memory) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, _ time.Time) (uint64, bool, error) {
	if err := m.lock(ctx, validRev(c, rev)); err != nil {
		return 0, false, err
	}
	defer m.mu.Unlock()
	e, ok := m.claimOf(scopeKey{c.Tenant, c.Source, c.Key})
	if !ok || e.Revision != rev {
		return 0, false, nil
	}
	return m.put(c, memEntry{Entry: kvwindow.Entry{Published: true, FirstClaimed: e.FirstClaimed}}), true, nil
}

// Release replaces c's claim by a release marker only while it is still revision rev, as
// kvwindow.Window.Release: true when it did, false when the key holds another claim or none.
func (m *Memory) Release(ctx context.Context, c kvwindow.Claim, rev uint64, mayBeStored bool) (bool, error) {
	if err := m.lock(ctx, validRev(c, rev)); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	if e, ok := m.claimOf(scopeKey{c.Tenant, c.Source, c.Key}); !ok || e.Revision != rev {
		return false, nil
	}
	m.put(c, memEntry{released: true, mayBeStored: mayBeStored})
	return true, nil
}

// Get returns the live claim on key, as kvwindow.Window.Get.
func (m *Memory) Get(ctx context.Context, tenant, source, key string) (kvwindow.Entry, bool, error) {
	if err := m.lock(ctx, scopeErr(tenant, source, key)); err != nil {
		return kvwindow.Entry{}, false, err
	}
	defer m.mu.Unlock()
	e, ok := m.claimOf(scopeKey{tenant, source, key})
	if !ok {
		return kvwindow.Entry{}, false, nil
	}
	return e.Entry, true, nil
}

// Forget drops the claim on key; it returns 1 if there was a live claim, else 0.
func (m *Memory) Forget(ctx context.Context, tenant, source, key string) (int, error) {
	if err := m.lock(ctx, scopeErr(tenant, source, key)); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	k := scopeKey{tenant, source, key}
	_, ok := m.claimOf(k)
	delete(m.entries, k)
	if ok {
		return 1, nil
	}
	return 0, nil
}

// ForgetAll drops every claim of tenant and source (source "" = the whole tenant) and returns how many live
// claims it dropped.
func (m *Memory) ForgetAll(ctx context.Context, tenant, source string) (int, error) {
	// An empty source is the whole tenant: any valid one stands for it in the check.
	if err := m.lock(ctx, scopeErr(tenant, cmp.Or(source, "s"), "k")); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for k := range m.entries {
		if k.tenant != tenant || (source != "" && k.source != source) {
			continue
		}
		if _, ok := m.claimOf(k); ok {
			n++
		}
		delete(m.entries, k)
	}
	return n, nil
}

// Ping fails with an error wrapping kvwindow.ErrUnavailable while the window is set unavailable.
func (m *Memory) Ping(ctx context.Context) error {
	err := m.lock(ctx, nil)
	if err == nil {
		m.mu.Unlock()
	}
	return err
}

// scopeErr is the error of KVKey's check of (tenant, source, key), or nil.
func scopeErr(tenant, source, key string) error {
	_, err := kvwindow.KVKey(tenant, source, key)
	return err
}
