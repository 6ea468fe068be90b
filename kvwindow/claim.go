package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// Claim is Window.Claim in this shard's bucket.
func (w *shard) Claim(ctx context.Context, c Claim, known Known) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	if err := w.usable(); err != nil {
		return Outcome{}, err
	}
	if err := w.holds(c); err != nil {
		return Outcome{}, err
	}
	// One Timeout bounds the whole claim. Writes and reads carry it as their own timeout (no context per claim: a
	// claim is the hot path).
	start := time.Now()
	deadline := start.Add(w.cfg.Timeout)
	subj := string(appendKVKey([]byte(w.prefix), c.Tenant, c.Source, c.Key))
	now := start.UnixMilli()
	val := appendClaimValue(make([]byte, 0, valueSize(c)), c, now, 0)
	ttl := ttlHeader(c.TTLSeconds())

	var (
		expected uint64 // last subject sequence the write expects: 0, a marker's revision or the claim taken over
		takeover bool   // the write replaces this envelope's claim from an earlier delivery: success is Owned
		first    = now  // the first claim time val records: now, or the one of the claim taken over
		flags    byte   // val's flagPublished and flagMayBeStored (copied from the claim taken over or the marker)
		retried  bool
		lastErr  error
	)
	// encode keeps val in step with what the next write must record: a takeover carries the earlier claim's first
	// claim time, publish and may-be-stored flag; a create over a release marker its may-be-stored flag; a fresh
	// create (over nothing or an expiry marker) none.
	encode := func(f int64, fl byte) {
		if f != first || fl != flags {
			first, flags = f, fl
			val = appendClaimValue(val[:0], c, first, flags)
		}
	}
	for attempt := 0; attempt < maxClaimAttempts; attempt++ {
		rev, err := w.create(ctx, subj, val, ttl, expected, time.Until(deadline))
		if err == nil {
			out := Outcome{Status: Won, Revision: rev, FirstClaimed: time.UnixMilli(first), MayBeStored: flags&flagMayBeStored != 0}
			if takeover {
				out.Status, out.Published = Owned, flags&flagPublished != 0
			}
			return out, nil
		}
		if errors.Is(err, ErrWindowLost) {
			return Outcome{}, err
		}
		code, conflict := jserr.WrongLastSeq(err)
		if !conflict {
			return Outcome{}, w.unavailable("claim", subj, err)
		}
		lastErr = err
		if code == jetstream.JSErrCodeStreamWrongLastSequence {
			w.stats.wrongSeq10071.Add(1)
			if k := known; k.Revision != 0 && k.Claimant != c.Claimant {
				if last, ok := jserr.LastSeq(err); ok && last == k.Revision {
					// 10071 names the key's last revision, as the stream leader stored it: the caller's own
					// published claim.
					w.stats.known.Add(1)
					return Outcome{Status: Duplicate, Revision: last, Published: true, HolderSeq: k.Claimant.Seq,
						HolderStamp: k.Claimant.Stamp}, nil
				}
			}
		} else {
			w.stats.wrongSeq10164.Add(1)
		}
		if code == jetstream.JSErrCodeStreamWrongLastSequenceConstant && !retried {
			// 10164 (replicated buckets): another write on this subject was in flight. Try once more with the
			// same expectation before reading.
			retried = true
			if err := w.backoff(ctx, time.Millisecond); err != nil {
				return Outcome{}, w.unavailable("claim", subj, err)
			}
			continue
		}
		// The key is taken, or holds a marker. Decide on what the stream leader holds (a direct get could be
		// answered by a replica that has not applied the winning write yet), unless this is a first delivery.
		m, err := w.read(ctx, c.Delivery.Count == 1, subj, deadline)
		if err != nil {
			return Outcome{}, w.unavailable("claim: read", subj, err)
		}
		if m == nil || m.Sequence == expected {
			// Expired or forgotten since, or (replicated buckets) the write that beat us is not applied on the
			// leader yet: back off briefly and try again. A key that still holds what we expected (a second 10164:
			// a write is in flight) gets the same write again.
			if m == nil {
				w.stats.empty.Add(1)
				expected, takeover = 0, false
				encode(now, 0)
			}
			if err := w.backoff(ctx, time.Duration(attempt+1)*time.Millisecond); err != nil {
				return Outcome{}, w.unavailable("claim", subj, err)
			}
			continue
		}
		takeover = false
		if isServerTombstone(m) {
			w.stats.markers.Add(1)
			expected = m.Sequence // an expiry marker or purge: create over it
			encode(now, 0)
			continue
		}
		v, ok := decodeClaimValue(m.Data)
		if ok && v.released() {
			if v.Claimant == c.Claimant {
				// This envelope was dead-lettered and its claim released: claiming again would make this delivery
				// the holder of an envelope the input may already have let go.
				return Outcome{Status: DeadLettered, Revision: m.Sequence}, nil
			}
			w.stats.markers.Add(1)
			expected = m.Sequence // another envelope's release marker: claim over it
			encode(now, v.Flags&flagMayBeStored)
			continue
		}
		if !ok || v.Claimant != c.Claimant {
			// A value that is no claim of ours (an operator's write) will never record a publish: waiting for it
			// could only hold the copy back until the key expires, so it counts as decided.
			first := m.Time
			if ok {
				first = v.firstClaimed()
			}
			return Outcome{Status: Duplicate, Revision: m.Sequence, Published: !ok || v.Pub,
				FirstClaimed: first.Truncate(time.Millisecond), HolderSeq: v.Claimant.Seq, HolderStamp: v.Claimant.Stamp}, nil
		}
		held := v.Delivery
		heldFirst := v.firstClaimed().Truncate(time.Millisecond)
		switch {
		case held == c.Delivery:
			return Outcome{Status: Owned, Revision: m.Sequence, Published: v.Pub, FirstClaimed: heldFirst, MayBeStored: v.mayBeStored()}, nil
		case c.Delivery.Before(held):
			return Outcome{Status: Stale, Revision: m.Sequence, FirstClaimed: heldFirst}, nil
		}
		// An earlier delivery of this envelope holds the claim: take it over, but only from that very revision,
		// so that a still later delivery's takeover is never overwritten (ours then loses and reads again).
		w.stats.takeovers.Add(1)
		expected, takeover = m.Sequence, true
		fl := v.Flags & flagMayBeStored
		if v.Pub {
			fl |= flagPublished
		}
		encode(heldFirst.UnixMilli(), fl)
	}
	return Outcome{}, w.unavailable("claim", subj, fmt.Errorf("no decision after %d attempts: %w", maxClaimAttempts, lastErr))
}

// backoff waits d before a claim writes again, and counts the wait.
func (w *shard) backoff(ctx context.Context, d time.Duration) error {
	start := time.Now()
	err := backoff.Wait(ctx, d)
	w.stats.backoffs.Add(1)
	w.stats.backoffNanos.Add(uint64(time.Since(start)))
	return err
}

// read is readLast, unless the test hook (readHook) makes it report an empty key.
func (w *shard) read(ctx context.Context, anyReplica bool, subj string, deadline time.Time) (*jetstream.RawStreamMsg, error) {
	if h := w.readHook; h != nil && h(subj) {
		return nil, nil
	}
	return w.readLast(ctx, anyReplica, subj, deadline)
}

// ttlHeader is the Nats-TTL value for a TTL in seconds, with its unit: the server tries time.ParseDuration first,
// so a bare "86400" would cost it a failed parse on every claim. A deployment uses a handful of TTLs, kept in a
// small table (a slot per TTL modulo its size; a collision only formats again).
func ttlHeader(sec int64) string {
	slot := &ttlCache[uint64(sec)%uint64(len(ttlCache))]
	if e := slot.Load(); e != nil && e.sec == sec {
		return e.s
	}
	e := &ttlEntry{sec: sec, s: strconv.FormatInt(sec, 10) + "s"}
	slot.Store(e)
	return e.s
}

// parseTTLHeader reads a Nats-TTL value as claims write it ("86400s").
func parseTTLHeader(v string) (int64, bool) {
	n, ok := strings.CutSuffix(v, "s")
	if !ok {
		return 0, false
	}
	sec, err := strconv.ParseInt(n, 10, 64)
	return sec, err == nil && sec > 0
}

type ttlEntry struct {
	sec int64
	s   string
}

var ttlCache [64]atomic.Pointer[ttlEntry]

// create publishes a claim value on subj expecting its last sequence to be expected, and checks where it was stored
// against what the bucket had reached before (acked). The message comes from a pool: the request has sent it by
// the time it returns.
func (w *shard) create(ctx context.Context, subj string, val []byte, ttl string, expected uint64, timeout time.Duration) (uint64, error) {
	m := msgPool.Get().(*nats.Msg)
	defer func() {
		m.Subject, m.Reply, m.Data = "", "", nil
		msgPool.Put(m)
	}()
	m.Subject, m.Data = subj, val
	m.Header[jetstream.ExpectedLastSubjSeqHeader][0] = strconv.FormatUint(expected, 10)
	m.Header[jetstream.MsgTTLHeader][0] = ttl
	seen := w.seen.Load()
	pa, err := w.req.Publish(ctx, m, timeout)
	if err == nil {
		err = w.acked(ctx, pa, seen)
	}
	if err != nil {
		return 0, err
	}
	return pa.Sequence, nil
}

var msgPool = sync.Pool{New: func() any {
	return &nats.Msg{Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: []string{""},
		jetstream.MsgTTLHeader:              []string{""},
	}}
}}

// kvOperation is the header the KV layer marks deletes and purges with.
const kvOperation = "KV-Operation"

// isTombstone reports whether a stored message is no claim: a server tombstone or a release marker.
func isTombstone(m *jetstream.RawStreamMsg) bool {
	if isServerTombstone(m) {
		return true
	}
	v, ok := decodeClaimValue(m.Data)
	return ok && v.released()
}

// isServerTombstone reports whether a stored message is a KV delete/purge or a server marker.
func isServerTombstone(m *jetstream.RawStreamMsg) bool {
	return m.Header.Get(kvOperation) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != ""
}

// latest reads the last message on subj from the stream leader by ctx's deadline, else within Config.Timeout;
// nil when there is none.
func (w *shard) latest(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(w.cfg.Timeout)
	}
	return w.readLast(ctx, false, subj, deadline)
}

// readLast reads the last message on subj (nil when there is none) from the stream leader, or with anyReplica by
// direct get when the bucket allows it. It fails with context.DeadlineExceeded when no answer came by deadline.
func (w *shard) readLast(ctx context.Context, anyReplica bool, subj string, deadline time.Time) (*jetstream.RawStreamMsg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	direct := anyReplica && w.direct.Load()
	m, err := w.req.GetLastMsg(ctx, w.get, subj, direct, left)
	if direct && errors.Is(err, nats.ErrNoResponders) {
		// Direct gets turned off under the running window (nats stream edit --allow-direct=false): no replica
		// answers them any more. Read at the leader now rather than fail until the next Ping sees the edit.
		w.direct.Store(false)
		return w.readLast(ctx, false, subj, deadline)
	}
	switch {
	case err == nil:
		raise(&w.seen, m.Sequence) // stored, so the bucket reached it: a later write of ours lands above
		return m, nil
	case err == jetstream.ErrMsgNotFound: // GetLastMsg returns the sentinel itself
		return nil, nil
	case err == nats.ErrTimeout: // Request returns the sentinel itself
		return nil, context.DeadlineExceeded
	}
	return nil, err
}

func (w *shard) unavailable(op, subj string, err error) error {
	return w.bucketErr(fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, strings.TrimPrefix(subj, w.prefix), err))
}
