package kvwindow

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Manager is the operators' hold on a window: it looks at or changes the window as a whole or a scope of it
// (status, list, rebalance, forget) and is never on a worker's claim path, as nats.go keeps a bucket's management
// (KeyValueManager) apart from its keys (KeyValue). A worker holds a *Window, whose calls decide or record one
// key's claim; the window commands hold a *Manager.
type Manager struct{ w *Window }

// NewManager binds to the window's buckets as New does. Unlike New, it binds a window with a shard bucket missing
// beside its siblings: that bucket is lost, Status reports it so, calls on its keys fail with ErrWindowLost naming
// it, and List and ForgetAll act on the other buckets and then fail naming it.
func NewManager(ctx context.Context, js jetstream.JetStream, cfg Config) (*Manager, error) {
	w, err := open(ctx, js, cfg, true)
	if err != nil {
		return nil, err
	}
	return &Manager{w: w}, nil
}

// Get is Window.Get.
func (m *Manager) Get(ctx context.Context, tenant, source, key string) (Entry, bool, error) {
	return m.w.Get(ctx, tenant, source, key)
}

// BucketOf is the bucket that holds the claim on (tenant, source, key).
func (m *Manager) BucketOf(tenant, source, key string) (string, error) {
	return m.w.BucketOf(tenant, source, key)
}

// Close is Window.Close.
func (m *Manager) Close() error { return m.w.Close() }

// Forget removes the claim on (tenant, source, key) by purging the key's subject, so that the next copy of the
// event is admitted. It returns 1 if there was a live claim, else 0.
func (m *Manager) Forget(ctx context.Context, tenant, source, key string) (int, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return 0, err
	}
	return m.w.shardOf(k).forget(ctx, k)
}

// ForgetAll removes every claim of tenant and source (source "" = the whole tenant) with one subject-filtered
// purge per bucket; it never lists a bucket. It returns the number of keys purged: live claims, plus keys whose
// claim expired less than the marker TTL ago (their marker is purged too).
func (m *Manager) ForgetAll(ctx context.Context, tenant, source string) (int, error) {
	w := m.w
	if err := validateScope(tenant, source, true); err != nil {
		return 0, err
	}
	total := 0
	var lost []error // of buckets lost: the others are purged all the same
	for _, s := range w.shards {
		n, err := s.forgetAll(ctx, tenant, source)
		total += n
		if errors.Is(err, ErrWindowLost) {
			lost = append(lost, err)
			continue
		}
		if err != nil {
			return total, errors.Join(append(lost, err)...)
		}
	}
	return total, errors.Join(lost...)
}

// List returns up to limit live claims of tenant (and of source; "" = every source), bucket by bucket and in
// revision order within a bucket, starting at from (0: the first); next is the next page's from (0: none). It reads
// with a short-lived consumer filtered on the scope, so its cost is the scope's claims (and markers), never whole
// buckets; a claim taken over or released meanwhile may be missed or listed at its new revision. Errors wrap
// ErrUnavailable or ErrInvalid. A lost bucket is passed over, and the error (ErrWindowLost) names it.
func (m *Manager) List(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
	w := m.w
	if err := validateScope(tenant, source, true); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxList {
		return nil, 0, fmt.Errorf("%w: limit: must be between 1 and %d, got %d", ErrInvalid, MaxList, limit)
	}
	const shardBits = 56
	first, rev := int(from>>shardBits), from&(1<<shardBits-1)
	if first >= len(w.shards) {
		return nil, 0, fmt.Errorf("%w: from: no shard %d", ErrInvalid, first)
	}
	var lost []error
	for i := first; i < len(w.shards); i++ {
		if err := w.shards[i].gone(); err != nil {
			lost, rev = append(lost, err), 0
			continue
		}
		es, nx, err := w.shards[i].list(ctx, tenant, source, rev, limit-len(entries))
		if err != nil {
			return nil, 0, err
		}
		rev = 0
		entries = append(entries, es...)
		if nx != 0 {
			return entries, uint64(i)<<shardBits | nx, errors.Join(lost...)
		}
		if len(entries) == limit {
			// The page is full: the next one starts at the next bucket (if it holds any of the scope's claims).
			if i+1 < len(w.shards) {
				return entries, uint64(i+1) << shardBits, errors.Join(lost...)
			}
			return entries, 0, errors.Join(lost...)
		}
	}
	return entries, 0, errors.Join(lost...)
}
