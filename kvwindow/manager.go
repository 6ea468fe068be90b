package kvwindow

import (
	"context"

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
