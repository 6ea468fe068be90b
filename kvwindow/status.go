package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// BytesPerKey is the server heap one live claim costs on each server that holds a replica of its bucket, as
// measured at 200,000 keys (OPERATIONS.md, "Sizing"): the stream's per-subject index and the message's cache entry.
const BytesPerKey = 185

// BucketStatus is what one of the window's buckets holds, and where.
type BucketStatus struct {
	Bucket   string   `json:"bucket"`
	Leader   string   `json:"leader"`   // the server leading the bucket's stream ("" on a single server)
	Replicas []string `json:"replicas"` // every server holding a replica, the leader first
	Keys     uint64   `json:"keys"`     // subjects with a message: live claims, release and expiry markers
	Bytes    uint64   `json:"bytes"`
	// MemoryEstimate is the server heap the bucket's keys cost on each server holding a replica: Keys × BytesPerKey.
	MemoryEstimate uint64 `json:"memory_estimate_bytes"`
	// Lost, when set, says why the bucket holds nothing: it is missing (deleted with its claims); the other fields
	// are then empty.
	Lost string `json:"lost,omitempty"`
	// Unusable are the servers of Replicas that are offline: not seen by the bucket's leader lately. Rebalance moves
	// no leader to one of them. A replica merely behind the leader is not among them: under claim load followers
	// are often a few operations behind at the instant the state is read.
	Unusable []string `json:"unusable,omitempty"`
	// Cluster is the bucket's cluster info from the same read (nil on a single server): each replica's state.
	Cluster *jetstream.ClusterInfo `json:"-"`
}

// Status reports every bucket of the window, in shard order: one stream info request per bucket, each bounded by
// Config.Timeout. A bucket missing (deleted with its claims) is reported lost (BucketStatus.Lost) beside the
// others.
func (m *Manager) Status(ctx context.Context) ([]BucketStatus, error) {
	out := make([]BucketStatus, len(m.w.shards))
	for i, s := range m.w.shards {
		b := &out[i]
		b.Bucket = s.cfg.Bucket
		if err := s.gone(); err != nil {
			b.Lost = err.Error()
			continue
		}
		info, err := s.info(ctx)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			// Deleted since NewManager bound it: lost as well, and the others still answer.
			b.Lost = s.observe(nil, err).Error()
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: bucket %q: %w", ErrUnavailable, s.cfg.Bucket, err)
		}
		b.Keys, b.Bytes = info.State.NumSubjects, info.State.Bytes
		b.MemoryEstimate = b.Keys * BytesPerKey
		b.placed(info.Cluster)
	}
	return out, nil
}

// placed fills b's leader, replicas and unusable replicas from its stream's cluster info (nil on a single server).
func (b *BucketStatus) placed(c *jetstream.ClusterInfo) {
	b.Cluster = c
	if c == nil {
		return
	}
	b.Leader = c.Leader
	if c.Leader != "" {
		b.Replicas = append(b.Replicas, c.Leader)
	}
	for _, p := range c.Replicas {
		if p == nil {
			continue
		}
		b.Replicas = append(b.Replicas, p.Name)
		if p.Offline {
			b.Unusable = append(b.Unusable, p.Name)
		}
	}
}

// NotAnswering reports whether err says that the server did not answer a request rather than refused it
// (jserr.NotAnswering): what a bucket's server that is stopping, or is back but still recovering its streams, and
// a bucket whose stream has no leader, give until they are back. bucket is the bucket of err (a *BucketError, as
// Ping's errors are), or "".
func NotAnswering(err error) (bucket string, ok bool) {
	if !jserr.NotAnswering(err) {
		return "", false
	}
	if be, ok := errors.AsType[*BucketError](err); ok {
		return be.Bucket, true
	}
	return "", true
}

// Move is one leader change Rebalance makes (or would make): the bucket's stream leader moves from From to To.
type Move struct {
	Bucket string `json:"bucket"`
	From   string `json:"from"`
	To     string `json:"to"`
	// Asked, when set, is the server the move asked for when the stream elected another one (To) instead: it was no
	// longer current or reachable by the time of the step-down.
	Asked string `json:"asked,omitempty"`
}

// Replica is one replica of a bucket: the server holding it.
type Replica struct {
	Bucket string `json:"bucket"`
	Server string `json:"server"`
}

// Plan is what Rebalance moves (or would move), and the replicas it left out.
type Plan struct {
	Moves []Move
	// Offline are the replicas no leader was planned onto as they are offline (BucketStatus.Unusable), in shard
	// order: the leaders are spread over the others only.
	Offline []Replica
}

// Rebalance spreads the buckets' stream leaders over the servers holding them, so that no server leads more than
// its share (nats-server does not spread leaders by itself): bucket by bucket, the leader goes to the replica that
// leads the fewest buckets so far, the current leader winning ties; an offline replica (BucketStatus.Unusable) is
// never chosen, as nats-server would elect another server in its place, and is reported (Plan.Offline). A replica
// behind the leader stays a candidate: a step-down to it is either refused by the server or ends on another one,
// which the move then reports (Move.Asked). With apply it asks each stream to step down in favour of that server (a
// preferred step-down) and waits for the change; without, it only plans. Leadership is moved one bucket at a time;
// claims pause for each bucket's election (well under a second on a healthy cluster). When a stream elects another
// server than the one asked for, Rebalance stops there: the last move returned names where the leader went
// (Move.Asked the server asked for), and the error says so.
func (m *Manager) Rebalance(ctx context.Context, apply bool) (Plan, error) {
	status, err := m.Status(ctx)
	if err != nil {
		return Plan{}, err
	}
	plan := planRebalance(status)
	if !apply {
		return plan, nil
	}
	for i, mv := range plan.Moves {
		made, err := m.w.stepDown(ctx, mv)
		if err != nil {
			done := plan.Moves[:i:i]
			if made.To != "" {
				// The leader moved, elsewhere than planned: report where, and let a later run plan from there.
				done = append(done, made)
			}
			return Plan{Moves: done, Offline: plan.Offline}, err
		}
	}
	return plan, nil
}

// planRebalance is the plan Rebalance makes from status, in shard order, with the offline replicas of the buckets it
// planned for.
func planRebalance(status []BucketStatus) Plan {
	led := map[string]int{}
	var plan Plan
	for _, b := range status {
		if b.Leader == "" || len(b.Replicas) < 2 {
			continue
		}
		best := b.Leader
		for _, p := range b.Replicas {
			if led[p] < led[best] && !slices.Contains(b.Unusable, p) {
				best = p
			}
		}
		led[best]++
		if best != b.Leader {
			plan.Moves = append(plan.Moves, Move{Bucket: b.Bucket, From: b.Leader, To: best})
		}
		for _, p := range b.Unusable {
			plan.Offline = append(plan.Offline, Replica{Bucket: b.Bucket, Server: p})
		}
	}
	return plan
}

// stepDown asks the bucket's stream leader to hand over to m.To and waits until the leader has changed. It returns
// the move as made: m when m.To leads; when the stream elected another server (m.To was no longer current or
// reachable), that server as To and m.To as Asked, with an error saying so; a zero Move when the leader did not
// change.
func (w *Window) stepDown(ctx context.Context, m Move) (Move, error) {
	s := w.shards[slices.IndexFunc(w.shards, func(s *shard) bool { return s.cfg.Bucket == m.Bucket })]
	req := map[string]any{"placement": map[string]string{"preferred": m.To}}
	var resp struct {
		Success bool `json:"success"`
	}
	octx, cancel := s.opCtx(ctx)
	err := jsapi.Request(octx, s.nc, s.api+"STREAM.LEADER.STEPDOWN."+s.stream, req, &resp)
	cancel()
	switch {
	case jserr.API(err) != nil:
		return Move{}, fmt.Errorf("kvwindow: step down %s to %s: %w", m.Bucket, m.To, err)
	case err != nil:
		return Move{}, fmt.Errorf("%w: step down %s: %w", ErrUnavailable, m.Bucket, err)
	}
	deadline := time.Now().Add(max(w.cfg.Timeout, 10*time.Second))
	for {
		// A stream without a leader (mid-election) does not answer its info: each read is short, and read again.
		pctx, cancel := context.WithTimeout(ctx, min(w.cfg.Timeout, 2*time.Second))
		info, err := s.info(pctx)
		cancel()
		if err == nil && info.Cluster != nil {
			switch l := info.Cluster.Leader; {
			case l == m.To:
				return m, nil
			case l != "" && l != m.From:
				made := Move{Bucket: m.Bucket, From: m.From, To: l, Asked: m.To}
				return made, fmt.Errorf("step down %s to %s: the stream elected %s instead (%s was not current or "+
					"not reachable when asked); run window rebalance again to plan from where the leaders are now",
					m.Bucket, m.To, l, m.To)
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("leader did not move")
			}
			return Move{}, fmt.Errorf("%w: step down %s to %s: %w", ErrUnavailable, m.Bucket, m.To, err)
		}
		if err := backoff.Wait(ctx, 50*time.Millisecond); err != nil {
			return Move{}, err
		}
	}
}
