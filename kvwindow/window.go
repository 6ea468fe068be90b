package kvwindow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// shard is the claim window over one JetStream KV bucket: the whole window when it is not sharded, one of its
// buckets when it is. It is safe for concurrent use and keeps no per-key state: every claim lives in the bucket.
type shard struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	cfg     Config                   // cfg.Bucket is this shard's bucket
	kvCfg   jetstream.KeyValueConfig // what bind creates when the bucket is missing (its name aside)
	stream  string                   // KV_<bucket>
	prefix  string                   // "$KV.<bucket>."
	api     string                   // JetStream API prefix, e.g. "$JS.API."
	leader  jetstream.Stream         // reads through the stream leader's API (never a direct get)
	any     jetstream.Stream         // reads by direct get when the bucket allows it (any replica may answer)
	async   bool                     // tests only: publish creates with PublishMsgAsync (see BenchmarkClaimParallel; sync is used)
	markTTL time.Duration
	stats   stats
}

// stats count what claims ran into; tests read them to learn the server's behaviour.
type stats struct {
	wrongSeq10071, wrongSeq10164, markers, empty, takeovers atomic.Uint64
}

// maxClaimAttempts bounds how often one Claim writes: a create can lose to a claim that expires or is forgotten
// before we read it, a 10164 answer asks for one more try, and a takeover can lose to a still later delivery of
// the same envelope (rare: it takes several deliveries of one envelope alive at once).
const maxClaimAttempts = 5

// newShard binds to the bucket cfg.Bucket, creating it (as create says) when it is missing and cfg.Provision is
// set. It fails when the bucket is missing and provisioning is off, or when the existing bucket cannot carry
// per-key TTLs (the error says how to fix it). An existing bucket is never modified.
func newShard(ctx context.Context, js jetstream.JetStream, cfg Config, create jetstream.KeyValueConfig) (*shard, error) {
	w := &shard{
		js:     js,
		nc:     js.Conn(),
		cfg:    cfg,
		kvCfg:  create,
		stream: "KV_" + cfg.Bucket,
		prefix: "$KV." + cfg.Bucket + ".",
		api:    apiPrefix(js.Options()),
	}
	st, err := w.bind(ctx)
	if err != nil {
		return nil, err
	}
	info := st.CachedInfo()
	if err := w.compatible(info); err != nil {
		return nil, err
	}
	w.markTTL = info.Config.SubjectDeleteMarkerTTL
	// A second handle keeps the bucket's own AllowDirect, for the reads where a replica's answer is good enough.
	if w.any, err = w.bind(ctx); err != nil {
		return nil, err
	}
	// Reads that decide a claim must come from the stream leader: a direct get may be answered by a replica
	// that has not applied the latest write yet. The client chooses direct gets from the cached stream info,
	// so this handle's copy says "no direct get"; it is never refreshed (Ping uses its own request).
	info.Config.AllowDirect = false
	w.leader = st
	return w, nil
}

func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		if strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix
		}
		return o.APIPrefix + "."
	}
	return jetstream.DefaultAPIPrefix
}

func (w *shard) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.cfg.Timeout)
}

func (w *shard) bind(ctx context.Context) (jetstream.Stream, error) {
	for attempt := 0; ; attempt++ {
		octx, cancel := w.opCtx(ctx)
		st, err := w.js.Stream(octx, w.stream)
		cancel()
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w: bucket %q: %w", ErrUnavailable, w.cfg.Bucket, err)
		}
		if !w.cfg.Provision {
			return nil, fmt.Errorf("kvwindow: bucket %q does not exist and provisioning is off: create it "+
				"(nats kv add %s --history=1 --marker-ttl=%s) or enable Provision", w.cfg.Bucket, w.cfg.Bucket, w.cfg.MarkerTTL)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("%w: bucket %q: created but not found", ErrUnavailable, w.cfg.Bucket)
		}
		octx, cancel = w.opCtx(ctx)
		kvc := w.kvCfg
		kvc.Bucket = w.cfg.Bucket
		_, err = w.js.CreateKeyValue(octx, kvc)
		cancel()
		// ErrBucketExists: another worker created it meanwhile (perhaps differently); bind and check it.
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, fmt.Errorf("kvwindow: bucket %q: create: %w", w.cfg.Bucket, err)
		}
	}
}

// compatible checks that an existing bucket can hold the window. It never changes the bucket.
func (w *shard) compatible(info *jetstream.StreamInfo) error {
	c := info.Config
	fix := fmt.Sprintf("delete and recreate it with per-key TTLs (nats kv del %s; nats kv add %s --history=1 --marker-ttl=%s), "+
		"or delete it and let the worker provision it", w.cfg.Bucket, w.cfg.Bucket, w.cfg.MarkerTTL)
	var problems []string
	if !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0 {
		problems = append(problems, "it does not support per-key TTLs (allow_msg_ttl and a limit marker TTL are required)")
	}
	if c.MaxMsgsPerSubject != 1 {
		// With history > 1 the server raises every message TTL to at least the marker TTL.
		problems = append(problems, fmt.Sprintf("it keeps history %d (must be 1)", c.MaxMsgsPerSubject))
	}
	if c.Discard != jetstream.DiscardNew {
		problems = append(problems, "its discard policy is old (a full bucket would evict live claims)")
	}
	if c.Mirror != nil || c.Sealed {
		problems = append(problems, "it is a mirror or sealed (not writable)")
	}
	if len(problems) > 0 {
		return fmt.Errorf("kvwindow: bucket %q is not usable as a claim window: %s: %s", w.cfg.Bucket, strings.Join(problems, "; "), fix)
	}
	return nil
}

// claimValue is the stored value of a claim. Claims written before ts, con and dlv existed lack them; they read
// as zero (unknown stamp, earliest delivery).
type claimValue struct {
	Seq uint64 `json:"seq"` // claimant: input stream sequence
	TS  int64  `json:"ts"`  // claimant: input stream timestamp, unix nanoseconds
	Con int64  `json:"con"` // delivery: consumer creation time, unix nanoseconds
	Dlv uint64 `json:"dlv"` // delivery: count
	At  int64  `json:"at"`  // claim time, unix milliseconds (worker clock)
	TTL int64  `json:"ttl"` // seconds
	Key string `json:"key"` // the event key, for operators
	Pub bool   `json:"pub"` // the event was published (MarkPublished)
}

func (v claimValue) claimant() Claimant { return Claimant{Seq: v.Seq, Stamp: v.TS} }
func (v claimValue) delivery() Delivery { return Delivery{Consumer: v.Con, Count: v.Dlv} }

// sameEnvelope reports whether a claim stored by claimant held was made by the envelope c. A stored claim without
// a stamp predates stamps: its sequence is all there is to compare.
func sameEnvelope(held, c Claimant) bool {
	return held.Seq == c.Seq && (held.Stamp == c.Stamp || held.Stamp == 0)
}

func appendClaimValue(dst []byte, c Claim, now time.Time, published bool) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, c.Claimant.Seq, 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, c.Claimant.Stamp, 10)
	dst = append(dst, `,"con":`...)
	dst = strconv.AppendInt(dst, c.Delivery.Consumer, 10)
	dst = append(dst, `,"dlv":`...)
	dst = strconv.AppendUint(dst, c.Delivery.Count, 10)
	dst = append(dst, `,"at":`...)
	dst = strconv.AppendInt(dst, now.UnixMilli(), 10)
	dst = append(dst, `,"ttl":`...)
	dst = strconv.AppendInt(dst, c.TTLSeconds(), 10)
	if published {
		dst = append(dst, `,"pub":true`...)
	}
	dst = append(dst, `,"key":`...)
	k, _ := json.Marshal(c.Key) // a string always marshals; invalid UTF-8 becomes U+FFFD
	dst = append(dst, k...)
	return append(dst, '}')
}

// Claim records that c's event was seen, with one atomic create of the key's subject ("expected last subject
// sequence 0", TTL c.TTL). It returns Won when this call created the claim and Duplicate when another claimant
// holds it. When c.Claimant already holds it (a redelivery), the latest delivery wins: the same delivery gets
// Owned with the stored revision, a later delivery takes the claim over (it rewrites the claim, expecting the
// stored revision, with the full TTL) and gets Owned with the new revision, and an earlier delivery gets Stale.
// Any error means the window could not decide: it wraps ErrUnavailable (or ErrInvalid for a bad claim) and is
// never a "not a duplicate".
func (w *shard) Claim(ctx context.Context, c Claim) (Outcome, error) {
	if err := c.Validate(); err != nil {
		return Outcome{}, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	subj := string(appendKVKey([]byte(w.prefix), c.Tenant, c.Source, c.Key))
	now := time.Now()
	val := appendClaimValue(make([]byte, 0, 160+len(c.Key)), c, now, false)
	ttl := strconv.FormatInt(c.TTLSeconds(), 10)

	var (
		expected  uint64 // last subject sequence the write expects: 0, a marker's revision or the claim taken over
		takeover  bool   // the write replaces this envelope's claim from an earlier delivery: success is Owned
		published bool   // the claim taken over records that the event was published
		retried   bool
		lastErr   error
	)
	for attempt := 0; attempt < maxClaimAttempts; attempt++ {
		rev, err := w.create(ctx, subj, val, ttl, expected)
		if err == nil {
			if takeover {
				return Outcome{Status: Owned, Revision: rev, Published: published}, nil
			}
			return Outcome{Status: Won, Revision: rev}, nil
		}
		code, conflict := wrongLastSeq(err)
		if !conflict {
			return Outcome{}, w.unavailable("claim", subj, err)
		}
		lastErr = err
		if code == jetstream.JSErrCodeStreamWrongLastSequence {
			w.stats.wrongSeq10071.Add(1)
		} else {
			w.stats.wrongSeq10164.Add(1)
		}
		if code == jetstream.JSErrCodeStreamWrongLastSequenceConstant && !retried {
			// 10164 (replicated buckets): another write on this subject was in flight. Try once more with the
			// same expectation before reading.
			retried = true
			if err := pause(ctx, time.Millisecond); err != nil {
				return Outcome{}, w.unavailable("claim", subj, err)
			}
			continue
		}
		// The key is taken, or holds a marker. Decide on what the stream leader holds (a direct get could be
		// answered by a replica that has not applied the winning write yet).
		read := w.leader
		if c.FirstDelivery {
			read = w.any
		}
		m, err := latest(ctx, read, subj)
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
			}
			if err := pause(ctx, time.Duration(attempt+1)*time.Millisecond); err != nil {
				return Outcome{}, w.unavailable("claim", subj, err)
			}
			continue
		}
		takeover = false
		if isTombstone(m) {
			w.stats.markers.Add(1)
			expected = m.Sequence // an expiry marker or purge: create over it
			continue
		}
		var v claimValue
		if json.Unmarshal(m.Data, &v) != nil || !sameEnvelope(v.claimant(), c.Claimant) {
			return Outcome{Status: Duplicate, Revision: m.Sequence}, nil
		}
		held := v.delivery()
		switch {
		case held == c.Delivery:
			return Outcome{Status: Owned, Revision: m.Sequence, Published: v.Pub}, nil
		case c.Delivery.Before(held):
			return Outcome{Status: Stale, Revision: m.Sequence}, nil
		}
		// An earlier delivery of this envelope holds the claim: take it over, but only from that very revision,
		// so that a still later delivery's takeover is never overwritten (ours then loses and reads again).
		w.stats.takeovers.Add(1)
		expected, takeover = m.Sequence, true
		if v.Pub != published {
			published = v.Pub
			val = appendClaimValue(val[:0], c, now, published) // a takeover keeps the record of the publish
		}
	}
	return Outcome{}, w.unavailable("claim", subj, fmt.Errorf("no decision after %d attempts: %w", maxClaimAttempts, lastErr))
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *shard) create(ctx context.Context, subj string, val []byte, ttl string, expected uint64) (uint64, error) {
	m := &nats.Msg{Subject: subj, Data: val, Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(expected, 10)},
		jetstream.MsgTTLHeader:              []string{ttl},
	}}
	if !w.async {
		pa, err := w.js.PublishMsg(ctx, m)
		if err != nil {
			return 0, err
		}
		return pa.Sequence, nil
	}
	f, err := w.js.PublishMsgAsync(m)
	if err != nil {
		return 0, err
	}
	select {
	case pa := <-f.Ok():
		return pa.Sequence, nil
	case err := <-f.Err():
		return 0, err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// wrongLastSeq reports whether err is the server's "wrong last sequence" answer (10071, or 10164 on replicated
// streams), with its code.
func wrongLastSeq(err error) (jetstream.ErrorCode, bool) {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return 0, false
	}
	switch api.ErrorCode {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		return api.ErrorCode, true
	}
	return 0, false
}

// kvOperation is the header the KV layer marks deletes and purges with.
const kvOperation = "KV-Operation"

// isTombstone reports whether a stored message is a KV delete/purge or a server marker rather than a claim.
func isTombstone(m *jetstream.RawStreamMsg) bool {
	return m.Header.Get(kvOperation) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != ""
}

// latest reads the last message on subj from the stream leader; nil when there is none.
func (w *shard) latest(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	return latest(ctx, w.leader, subj)
}

func latest(ctx context.Context, st jetstream.Stream, subj string) (*jetstream.RawStreamMsg, error) {
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

func (w *shard) unavailable(op, subj string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, strings.TrimPrefix(subj, w.prefix), err)
}

// Get returns the live claim on (tenant, source, key), read from the stream leader.
func (w *shard) Get(ctx context.Context, tenant, source, key string) (Entry, bool, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
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
	e.Tenant, e.Source, e.Key, e.KVKey = tenant, source, key, k
	return e, true, nil
}

// entryOf decodes a stored claim (its value, headers, revision and store time); the caller sets the scope.
func entryOf(data []byte, h nats.Header, rev uint64, at time.Time) Entry {
	e := Entry{Revision: rev, ClaimedAt: at}
	var v claimValue
	if json.Unmarshal(data, &v) == nil {
		e.Claimant, e.Delivery = v.claimant(), v.delivery()
		e.TTL = time.Duration(v.TTL) * time.Second
		e.Key = v.Key
	}
	if ttl, err := strconv.ParseInt(h.Get(jetstream.MsgTTLHeader), 10, 64); err == nil && ttl > 0 {
		e.TTL = time.Duration(ttl) * time.Second
	}
	return e
}

// Release gives up the claim this delivery holds on (tenant, source, key): rev is the revision its Claim returned
// with Won or Owned (never a Duplicate's or Stale's revision: that claim is someone else's). It removes the claim
// only while the key's last revision is still rev, with one write to the key's subject: a KV purge (rollup of the
// subject) expected at rev. It can therefore never remove a claim made since by another envelope or a later
// delivery of this one, nor an expiry marker; Forget, by contrast, removes whatever the key holds. It reports
// true when it removed the claim and false when the key had moved on (the claim expired, was forgotten, taken
// over or replaced), which is not an error. The purge marker it leaves lives for the bucket's marker TTL, like
// an expiry marker, and the next Claim of the key writes over it. Errors wrap ErrUnavailable (or ErrInvalid for
// bad arguments, including rev 0); after a timeout the release may still have happened.
func (w *shard) Release(ctx context.Context, tenant, source, key string, rev uint64) (bool, error) {
	k, err := KVKey(tenant, source, key)
	if err != nil {
		return false, err
	}
	if rev == 0 {
		// Expecting revision 0 means "the key is empty": the purge would write a marker on a free key.
		return false, fmt.Errorf("%w: revision: must not be 0", ErrInvalid)
	}
	// As in purge: a publish made while disconnected sits in the client's reconnect buffer and would land after
	// the caller was told it failed, leaving the caller to believe it still holds the claim.
	if !w.nc.IsConnected() {
		return false, w.unavailable("release", k, nats.ErrDisconnected)
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	m := &nats.Msg{Subject: w.prefix + k, Header: nats.Header{
		kvOperation:                         []string{"PURGE"},
		jetstream.MsgRollup:                 []string{jetstream.MsgRollupSubject},
		jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)},
		// Without a TTL the purge marker would stay on the key for good (the bucket's limits never remove it).
		jetstream.MsgTTLHeader: []string{strconv.FormatInt(int64((w.markTTL+time.Second-1)/time.Second), 10)},
	}}
	if _, err := w.js.PublishMsg(ctx, m); err != nil {
		if _, conflict := wrongLastSeq(err); conflict {
			// 10071: the key holds something else now. 10164 (replicated buckets): another write on the key is in
			// flight. It passed its own check against the key as it is, so it expects rev (a later delivery's
			// takeover, or this release repeated) or nothing (an operator's write): the key is moving on from rev.
			return false, nil
		}
		return false, w.unavailable("release", k, err)
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
	req, _ := json.Marshal(struct {
		Filter string `json:"filter"`
	}{filter})
	msg, err := w.nc.RequestWithContext(ctx, w.api+"STREAM.PURGE."+w.stream, req)
	if err != nil {
		return 0, err
	}
	var resp struct {
		Success bool                `json:"success"`
		Purged  uint64              `json:"purged"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("purge response: %w", err)
	}
	if resp.Error != nil {
		return 0, resp.Error
	}
	if !resp.Success {
		return 0, errors.New("purge not successful")
	}
	return resp.Purged, nil
}

// Ping checks that the bucket answers (one stream info request); errors wrap ErrUnavailable.
func (w *shard) Ping(ctx context.Context) error {
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	if _, err := w.js.Stream(ctx, w.stream); err != nil {
		return fmt.Errorf("%w: ping bucket %q: %w", ErrUnavailable, w.cfg.Bucket, err)
	}
	return nil
}

// MarkPublished records in the claim that c's event was published, while the claim is still at revision rev (the
// one Claim returned to this delivery); a later delivery of the envelope that finds the mark gets Owned with
// Published and need not publish again — which matters once the output's duplicate window no longer remembers the
// first publish (acks refused for minutes, a consumer created again over kept envelopes). It reports false when
// the key moved on (taken over by a later delivery, released, expired). The claim's TTL starts again.
func (w *shard) MarkPublished(ctx context.Context, c Claim, rev uint64) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	if rev == 0 {
		return false, fmt.Errorf("%w: revision: must not be 0", ErrInvalid)
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	subj := string(appendKVKey([]byte(w.prefix), c.Tenant, c.Source, c.Key))
	val := appendClaimValue(make([]byte, 0, 160+len(c.Key)), c, time.Now(), true)
	if _, err := w.create(ctx, subj, val, strconv.FormatInt(c.TTLSeconds(), 10), rev); err != nil {
		if _, conflict := wrongLastSeq(err); conflict {
			return false, nil
		}
		return false, w.unavailable("mark published", subj, err)
	}
	return true, nil
}
