package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// getKey is Window.Get of k, the KV key of (tenant, source, key), in this shard's bucket.
func (w *shard) getKey(ctx context.Context, k, tenant, source, key string) (Entry, bool, error) {
	if err := w.closedErr(); err != nil {
		return Entry{}, false, err
	}
	if err := w.gone(); err != nil {
		return Entry{}, false, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	m, err := w.latest(ctx, w.prefix+k)
	if err != nil {
		return Entry{}, false, w.unavailable("get", k, err)
	}
	if m == nil || isTombstone(m) {
		return Entry{}, false, nil
	}
	e := entryOf(m.Data, m.Header, m.Sequence, m.Time)
	e.Tenant, e.Source, e.Key, e.KVKey, e.Bucket = tenant, source, key, k, w.cfg.Bucket
	return e, true, nil
}

// entryOf decodes a stored claim; the caller sets the scope (and Key, when the KV key holds it raw).
func entryOf(data []byte, h nats.Header, rev uint64, at time.Time) Entry {
	e := Entry{Revision: rev, ClaimedAt: at}
	if v, ok := decodeClaimValue(data); ok {
		e.Claimant, e.Delivery, e.FirstClaimed = v.Claimant, v.Delivery, v.firstClaimed()
		e.Key, e.Published = v.Key, v.Pub
	}
	if ttl, ok := parseTTLHeader(h.Get(jetstream.MsgTTLHeader)); ok {
		e.TTL = time.Duration(ttl) * time.Second
	}
	return e
}

// Release is Window.Release in this shard's bucket.
func (w *shard) Release(ctx context.Context, c Claim, rev uint64, mayBeStored bool) (bool, error) {
	if err := validAt(c, rev); err != nil {
		return false, err
	}
	subj := string(appendKVKey([]byte(w.prefix), c.Tenant, c.Source, c.Key))
	// As in purge: a publish made while disconnected sits in the client's reconnect buffer and would land after
	// the caller was told it failed, leaving the caller to believe it still holds the claim.
	if !w.nc.IsConnected() {
		return false, w.unavailable("release", subj, nats.ErrDisconnected)
	}
	if err := w.usable(); err != nil {
		return false, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	var flags byte = flagReleased
	if mayBeStored {
		flags |= flagMayBeStored
	}
	val := appendClaimValue(make([]byte, 0, valueSize(c)), c, time.Now().UnixMilli(), flags)
	_, ok, err := w.writeAt(ctx, "release", subj, c, val, rev)
	return ok, err
}

// writeAt writes val, c's claim value, on subj expecting the key's last revision to be rev: the new revision, or
// false (no error) when the key has moved on from rev.
func (w *shard) writeAt(ctx context.Context, op, subj string, c Claim, val []byte, rev uint64) (uint64, bool, error) {
	newRev, err := w.create(ctx, subj, val, ttlHeader(c.TTLSeconds()), rev, w.cfg.Timeout)
	if err == nil {
		return newRev, true, nil
	}
	if errors.Is(err, ErrWindowLost) {
		return 0, false, err
	}
	if _, conflict := jserr.WrongLastSeq(err); conflict {
		// 10071: the key holds something else now. 10164 (replicated buckets): another write on the key is in
		// flight. It passed its own check against the key as it is, so it expects rev (a later delivery's
		// takeover, or this write repeated) or nothing (an operator's write): the key is moving on from rev.
		return 0, false, nil
	}
	return 0, false, w.unavailable(op, subj, err)
}

// forget is Manager.Forget of the KV key k in this shard's bucket.
func (w *shard) forget(ctx context.Context, k string) (int, error) {
	if err := w.gone(); err != nil {
		return 0, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	m, err := w.latest(ctx, w.prefix+k)
	if err != nil {
		return 0, w.unavailable("forget: read", k, err)
	}
	n, err := w.purge(ctx, w.prefix+k)
	if err != nil {
		return 0, w.unavailable("forget", k, err)
	}
	if n > 0 && m != nil && !isTombstone(m) {
		return 1, nil
	}
	return 0, nil
}

// forgetAll is Manager.ForgetAll in this shard's bucket.
func (w *shard) forgetAll(ctx context.Context, tenant, source string) (int, error) {
	if err := w.gone(); err != nil {
		return 0, err
	}
	filter := w.scopeFilter(tenant, source)
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	n, err := w.purge(ctx, filter)
	if err != nil {
		return 0, w.unavailable("forget all", strings.TrimSuffix(filter, ".>"), err)
	}
	return int(n), nil
}

// scopeFilter is the subject filter of tenant's claims in this bucket, or of (tenant, source)'s when source is set.
func (w *shard) scopeFilter(tenant, source string) string {
	if source == "" {
		return w.prefix + tenant + ".>"
	}
	return w.prefix + tenant + "." + source + ".>"
}

// purge is a subject-filtered stream purge, sent as the API request itself: Stream.Purge does not return the count.
func (w *shard) purge(ctx context.Context, filter string) (uint64, error) {
	// A request made while disconnected sits in the client's reconnect buffer and would be sent after the
	// caller was told it failed; a purge must not run behind the caller's back.
	if !w.nc.IsConnected() {
		return 0, fmt.Errorf("purge %s: %w", filter, nats.ErrDisconnected)
	}
	var resp struct {
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
	}
	req := struct {
		Filter string `json:"filter"`
	}{filter}
	if err := jsapi.Request(ctx, w.nc, w.api+"STREAM.PURGE."+w.stream, req, &resp); err != nil {
		return 0, err
	}
	if !resp.Success {
		return 0, errors.New("purge not successful")
	}
	return resp.Purged, nil
}

// MarkPublished is Window.MarkPublished in this shard's bucket.
func (w *shard) MarkPublished(ctx context.Context, c Claim, rev uint64, firstClaimed time.Time) (uint64, bool, error) {
	if err := validAt(c, rev); err != nil {
		return 0, false, err
	}
	if err := w.usable(); err != nil {
		return 0, false, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	subj := string(appendKVKey([]byte(w.prefix), c.Tenant, c.Source, c.Key))
	first := firstClaimed
	if first.IsZero() {
		m, err := w.latest(ctx, subj)
		if err != nil {
			return 0, false, w.unavailable("mark published: read", subj, err)
		}
		if m == nil || m.Sequence != rev || isTombstone(m) {
			return 0, false, nil
		}
		v, ok := decodeClaimValue(m.Data)
		if !ok {
			return 0, false, nil // not a claim of this package's: not the one at rev
		}
		first = v.firstClaimed()
	}
	val := appendClaimValue(make([]byte, 0, valueSize(c)), c, first.UnixMilli(), flagPublished)
	return w.writeAt(ctx, "mark published", subj, c, val, rev)
}
