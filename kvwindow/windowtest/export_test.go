package windowtest

import (
	"cmp"
	"context"
	"time"
)

// The in-memory window's calls that only this package's tests make.

// SetClock replaces the clock (nil restores time.Now). Use it to expire claims without waiting.
func (m *Memory) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	m.now = now
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
