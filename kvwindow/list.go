package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxList is the most claims one List call returns.
const MaxList = 10_000

const (
	// listTimeout is how long a page may take when the caller's context sets no deadline: in a bucket of
	// millions of keys the server scans message blocks to find the next claim of a sparse scope, seconds at
	// 5 million keys (BENCHMARKS.md, "A window of millions of keys").
	listTimeout = 30 * time.Second
	// listPull is how long one pull request waits. Each is short so that a pull answered by nobody (the server
	// still scanning) costs only a retry: what the server has found stays with the consumer, which starts the
	// next pull where the last one stopped.
	listPull = 2 * time.Second
	// listBatch is the most messages one pull asks for.
	listBatch = 256
	// listIdle is how long the server keeps a listing consumer nobody pulls from: a listing that dies leaves
	// nothing behind for long.
	listIdle = time.Minute
)

// list returns up to limit live claims of the scope held by this bucket, in revision order from revision from (0:
// the first), and the revision where the next page starts (0: none). It reads with an ephemeral consumer filtered
// on the scope, whose creation counts the scope's messages (from the per-subject index): an empty answer is a count
// of zero, never a wait that ran out, and messages counted but not delivered by the deadline fail the page.
func (w *shard) list(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
	filter := w.scopeFilter(tenant, source)
	scope := strings.TrimSuffix(strings.TrimPrefix(filter, w.prefix), ".>")
	began := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, max(w.cfg.Timeout, listTimeout))
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	lister := &lister{w: w, scope: scope, filter: filter, from: from}
	defer lister.drop(ctx)
	if err := lister.open(ctx, from); err != nil {
		return nil, 0, err
	}
	for lister.received < lister.pending {
		n := min(lister.pending-lister.received, uint64(max(limit+1-len(entries), 16)), listBatch)
		// After a loss in transit the pulls wait longer: on a link slow enough to lose one, a pull as short as
		// the last would lose the next as well.
		wait := min(listPull<<lister.reopened, time.Until(deadline))
		if wait <= 0 {
			return nil, 0, lister.incomplete(time.Since(began))
		}
		batch, err := lister.cons.Fetch(int(n), jetstream.FetchMaxWait(wait))
		if err != nil {
			return nil, 0, w.unavailable("list", scope, err)
		}
		got, done, gap := 0, false, false
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return nil, 0, w.unavailable("list", scope, fmt.Errorf("message metadata: %w", err))
			}
			if meta.Sequence.Consumer != lister.received+1 {
				// A message the server sent was not received (it arrived after its pull had expired here): with
				// no acknowledgements the server will not send it again, so read on from the last one received.
				gap = true
				break
			}
			got++
			lister.received++
			lister.last = meta.Sequence.Stream
			done = meta.NumPending == 0
			if isTombstone(&jetstream.RawStreamMsg{Header: m.Headers(), Data: m.Data()}) {
				continue
			}
			if len(entries) == limit {
				// A live claim beyond the page: the next page starts with it.
				return entries, meta.Sequence.Stream, nil
			}
			e := entryOf(m.Data(), m.Headers(), meta.Sequence.Stream, meta.Timestamp)
			e.KVKey, e.Bucket = strings.TrimPrefix(m.Subject(), w.prefix), w.cfg.Bucket
			fillScope(&e)
			entries = append(entries, e)
		}
		if err := batch.Error(); err != nil && !gap && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, 0, w.unavailable("list", scope, err)
		}
		if done {
			break
		}
		if got == 0 && !gap {
			// Nothing within one pull: the server is still scanning for the next match, the scope's remaining
			// messages went away (expired or forgotten) after it counted them, or what it sent was lost on the
			// way. Only the consumer's own counts tell these apart.
			info, err := lister.cons.Info(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil, 0, lister.incomplete(time.Since(began))
				}
				return nil, 0, w.unavailable("list", scope, err)
			}
			if info.Delivered.Consumer == lister.received && info.NumPending == 0 {
				break
			}
			gap = info.Delivered.Consumer > lister.received
		}
		if gap {
			if err := lister.reopen(ctx); err != nil {
				return nil, 0, err
			}
		}
	}
	return entries, 0, nil
}

// lister is one listing's consumer and what it has read.
type lister struct {
	w             *shard
	scope, filter string
	from          uint64
	cons          jetstream.Consumer
	// pending is how many of the scope's messages (expiry and purge markers included) the server counted from
	// the consumer's start; received how many of them arrived; last the revision of the last one.
	pending, received, last uint64
	reopened                int
}

// maxReopen bounds how often a listing starts its consumer again after messages were lost in transit.
const maxReopen = 3

// open creates the listing consumer at revision start (0: the first).
func (l *lister) open(ctx context.Context, start uint64) error {
	cfg := jetstream.ConsumerConfig{
		FilterSubject: l.filter, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, Replicas: 1, InactiveThreshold: listIdle,
	}
	if start > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	cons, err := l.w.leader.CreateConsumer(ctx, cfg)
	if err != nil {
		return l.w.unavailable("list", l.scope, err)
	}
	l.cons, l.pending, l.received = cons, cons.CachedInfo().NumPending, 0
	return nil
}

// reopen replaces the consumer with one that starts after the last message received.
func (l *lister) reopen(ctx context.Context) error {
	if l.reopened++; l.reopened > maxReopen {
		return l.w.unavailable("list", l.scope, fmt.Errorf("messages of the scope were lost on the way %d times", maxReopen))
	}
	start := l.from
	if l.last > 0 {
		start = l.last + 1
	}
	l.drop(ctx)
	return l.open(ctx, start)
}

// incomplete is the error of a page the server did not deliver in time: it says what the server had found.
func (l *lister) incomplete(took time.Duration) error {
	start := "the first revision"
	if l.from > 0 {
		start = fmt.Sprintf("revision %d", l.from)
	}
	return fmt.Errorf("%w: list %s: bucket %q holds %d messages of the scope from %s, but the server delivered %d within %s; "+
		"it is still scanning the bucket for the rest (seconds per page in a bucket of millions of keys): try again with "+
		"more time, or narrow the scope to one source", ErrUnavailable, l.scope, l.w.cfg.Bucket, l.pending, start, l.received, took.Round(time.Millisecond))
}

// drop deletes the listing consumer at once rather than leaving it to its inactivity threshold. It runs after the
// listing's deadline may have passed, so it has a short deadline of its own.
func (l *lister) drop(ctx context.Context) {
	if l.cons == nil {
		return
	}
	name := l.cons.CachedInfo().Name
	l.cons = nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(l.w.cfg.Timeout, 5*time.Second))
	defer cancel()
	_ = l.w.js.DeleteConsumer(ctx, l.w.stream, name)
}
