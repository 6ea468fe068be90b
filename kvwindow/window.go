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

// Get returns the live claim on (tenant, source, key), read from the stream leader.
func (w *shard) Get(ctx context.Context, tenant, source, key string) (Entry, bool, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return Entry{}, false, err
	}
	if w.closed != nil && w.closed.Load() {
		return Entry{}, false, w.usable()
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

// entryOf decodes a stored claim (its value, headers, revision and store time); the caller sets the scope. A
// compact value carries the event key only when the KV key holds its hash: for a raw key Key stays "" and the
// caller takes it from the KV key (see scopeOf).
func entryOf(data []byte, h nats.Header, rev uint64, at time.Time) Entry {
	e := Entry{Revision: rev, ClaimedAt: at}
	if v, ok := decodeClaimValue(data); ok {
		e.Claimant, e.Delivery = v.claimant(), v.delivery()
		e.Key = v.Key
		e.Published = v.Pub
		e.FirstClaimed = v.firstClaimed()
	}
	if ttl, ok := parseTTLHeader(h.Get(jetstream.MsgTTLHeader)); ok {
		e.TTL = time.Duration(ttl) * time.Second
	}
	return e
}

// Release gives up the claim this delivery holds on c's key after dead-lettering its event: rev is the revision
// its Claim returned with Won or Owned (never a Duplicate's or Stale's revision: that claim is someone else's). It
// replaces the claim only while the key's last revision is still rev, with one write to the key's subject expected
// at rev: a release marker naming c's claimant and delivery, with the claim's TTL (c.TTL). It can therefore never
// replace a claim made since by another envelope or a later delivery of this one, nor an expiry marker; Forget, by
// contrast, removes whatever the key holds. The marker is no claim (Get and List skip it): the next Claim of
// another envelope writes over it (Won), while a Claim of c's own envelope gets DeadLettered, so that a later
// delivery of an envelope already dead-lettered never holds the key again. mayBeStored says in the marker that the
// event may be in the output (the releasing delivery took the claim over from an earlier one): the claim written
// over it reports Outcome.MayBeStored. It reports true when it wrote the marker and false when the key had moved
// on (the claim expired, was forgotten, taken over or replaced), which is not an error. Errors wrap
// ErrUnavailable (or ErrInvalid for a bad claim, including rev 0); after a timeout the release may still have
// happened. Unlike Claim, it writes under an age limit shorter than the claim's TTL (see MarkPublished).
func (w *shard) Release(ctx context.Context, c Claim, rev uint64, mayBeStored bool) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	if rev == 0 {
		// Expecting revision 0 means "the key is empty": the marker would be written on a free key.
		return false, fmt.Errorf("%w: revision: must not be 0", ErrInvalid)
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
	if _, err := w.create(ctx, subj, val, ttlHeader(c.TTLSeconds()), rev, w.cfg.Timeout); err != nil {
		if errors.Is(err, ErrWindowLost) {
			return false, err
		}
		if _, conflict := jserr.WrongLastSeq(err); conflict {
			// 10071: the key holds something else now. 10164 (replicated buckets): another write on the key is in
			// flight. It passed its own check against the key as it is, so it expects rev (a later delivery's
			// takeover, or this release repeated) or nothing (an operator's write): the key is moving on from rev.
			return false, nil
		}
		return false, w.unavailable("release", subj, err)
	}
	return true, nil
}

// Forget removes the claim on (tenant, source, key) by purging the key's subject, so that the next copy of the
// event is admitted. It returns 1 if there was a live claim, else 0.
func (w *shard) Forget(ctx context.Context, tenant, source, key string) (int, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return 0, err
	}
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

// ForgetAll removes every claim of tenant and source (source "" = the whole tenant) with one subject-filtered
// purge; it never lists the bucket. It returns the number of keys purged: live claims, plus keys whose claim
// expired less than the marker TTL ago (their marker is purged too).
func (w *shard) ForgetAll(ctx context.Context, tenant, source string) (int, error) {
	if err := validateScope(tenant, source, true); err != nil {
		return 0, err
	}
	if err := w.gone(); err != nil {
		return 0, err
	}
	filter := w.prefix + tenant + ".>"
	if source != "" {
		filter = w.prefix + tenant + "." + source + ".>"
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	n, err := w.purge(ctx, filter)
	if err != nil {
		return 0, w.unavailable("forget all", strings.TrimSuffix(filter, ".>"), err)
	}
	return int(n), nil
}

// purge is a subject-filtered stream purge; the client's Stream.Purge does not return the count, so this sends
// the API request itself.
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

// Ping checks that the bucket answers and is still the bucket New bound to (one stream info request): a bucket
// deleted, or deleted and created again, fails with ErrWindowLost, and so does every later claim in it. It takes up
// the bucket's age limit as it is now, and fails with ErrAgeLimit while that is shorter than the longest claim
// TTL the bucket must hold (Config.MaxTTL, or a longer TTL a claim was refused for). Errors wrap ErrUnavailable.
func (w *shard) Ping(ctx context.Context) error {
	_, _, err := w.pingInfo(ctx)
	return err
}

// MarkPublished records in the claim that c's event was published, while the claim is still at revision rev (the
// one Claim returned to this delivery, or the one an earlier MarkPublished returned); a later delivery of the
// envelope that finds the mark gets Owned with Published and need not publish again, and a copy of the event
// gets Duplicate with Published. It returns the claim's new revision (for Release or another mark), or false when
// the key moved on (taken over by a later delivery, released, expired). The claim's TTL starts again. The write
// keeps the claim's first claim time: firstClaimed, the Outcome.FirstClaimed this delivery's Claim returned; zero
// reads it from the claim first (one more round trip to the stream leader). Unlike Claim, it writes under an age
// limit shorter than the claim's TTL: the claim is held already and lapses at the age limit whether or not the
// mark is written, and the mark lapses later. Refused, it would be handed back, each redelivery refused its
// claim until the limit is lifted, and the event then published again.
func (w *shard) MarkPublished(ctx context.Context, c Claim, rev uint64, firstClaimed time.Time) (uint64, bool, error) {
	if err := c.Validate(); err != nil {
		return 0, false, err
	}
	if rev == 0 {
		return 0, false, fmt.Errorf("%w: revision: must not be 0", ErrInvalid)
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
	newRev, err := w.create(ctx, subj, val, ttlHeader(c.TTLSeconds()), rev, w.cfg.Timeout)
	if err != nil {
		if errors.Is(err, ErrWindowLost) {
			return 0, false, err
		}
		if _, conflict := jserr.WrongLastSeq(err); conflict {
			return 0, false, nil
		}
		return 0, false, w.unavailable("mark published", subj, err)
	}
	return newRev, true, nil
}
