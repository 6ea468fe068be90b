package kvwindow

import (
	"context"
	"time"
)

// Claims is the claim path: what a worker calls for every envelope. Its calls decide or record one key's claim
// and are bounded by Config.Timeout. *Window implements it.
type Claims interface {
	Claim(ctx context.Context, c Claim, known Known) (Outcome, error)
	MarkPublished(ctx context.Context, c Claim, rev uint64, firstClaimed time.Time) (uint64, bool, error)
	Release(ctx context.Context, c Claim, rev uint64, mayBeStored bool) (bool, error)
	Get(ctx context.Context, tenant, source, key string) (Entry, bool, error)
	Ping(ctx context.Context) error
	Close() error
}

// Operations are the operators' calls: they look at or change the window as a whole or a scope of it (status,
// list, rebalance, forget) and are never on a worker's claim path, as nats.go keeps a bucket's management apart
// from its keys. *Manager implements it; *Window does not.
type Operations interface {
	Status(ctx context.Context) ([]BucketStatus, error)
	List(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error)
	Rebalance(ctx context.Context, apply bool) ([]Move, error)
	Forget(ctx context.Context, tenant, source, key string) (int, error)
	ForgetAll(ctx context.Context, tenant, source string) (int, error)
	Get(ctx context.Context, tenant, source, key string) (Entry, bool, error)
	Buckets() []string
	BucketOf(tenant, source, key string) (string, error)
	Close() error
}

var (
	_ Claims     = (*Window)(nil)
	_ Operations = (*Manager)(nil)
)
