package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jsapi"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natsreq"
)

// shard is the claim window over one JetStream KV bucket: the whole window when it is not sharded, one of its
// buckets when it is. It is safe for concurrent use and keeps no per-key state: every claim lives in the bucket.
type shard struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	cfg    Config            // cfg.Bucket is this shard's bucket
	stream string            // KV_<bucket>
	prefix string            // "$KV.<bucket>."
	api    string            // JetStream API prefix, e.g. "$JS.API."
	leader jetstream.Stream  // the bucket's stream (the lister's consumers)
	req    *natsreq.Mux      // claim writes and key reads: answers matched as they arrive, parsed without reflection
	get    natsreq.StreamGet // the key reads' subjects
	// direct is set while the bucket allows direct gets (as bound, then as each Ping finds it: an operator may turn
	// them off): reads a replica may answer go to any of them.
	direct  atomic.Bool
	markTTL time.Duration
	// maxAge is the bucket's age limit (its stream's max_age; 0: none) as last seen, at bind or by a Ping: no claim
	// with a longer TTL is written (see holds).
	maxAge atomic.Int64
	// refused is the longest claim TTL the age limit made this shard refuse so far (see holds): Ping fails while
	// the limit stays below it, as below Config.MaxTTL.
	refused atomic.Uint64
	// evicting is set while the bucket's stream, as last seen by a Ping, discards old messages (evictsClaims):
	// Claim and Ping fail with ErrEvicting until the operator puts discard new back.
	evicting atomic.Bool
	stats    stats
	// created is the bucket's creation time when New bound it: a bucket found with another one was deleted and
	// created again, and every claim it held is gone.
	created time.Time
	// seen is the highest sequence of the bucket this worker has seen (see recreatedAck).
	seen   atomic.Uint64
	lost   atomic.Pointer[lostState] // set once the bucket is known deleted or re-created
	closed *atomic.Bool              // the window's; always set by open before the shard is used
	// absent: the bucket was missing beside its siblings when NewManager bound the window (see lostShard).
	absent   bool
	readHook func(subj string) bool // tests only: a claim's read of subj finds the key empty when it returns true
}

// lostState is why a bucket refuses claims (see observe).
type lostState struct {
	err       error
	recreated bool
}

// stats count what claims ran into; tests read them to learn the server's behaviour.
type stats struct {
	wrongSeq10071, wrongSeq10164, markers, empty, takeovers, known, backoffs, backoffNanos atomic.Uint64
}

// maxClaimAttempts bounds how often one Claim writes: a create can lose to a claim that expires or is forgotten
// before we read it, a 10164 answer asks for one more try, and a takeover can lose to a still later delivery of
// the same envelope (rare: it takes several deliveries of one envelope alive at once).
const maxClaimAttempts = 5

// newShard binds to the bucket cfg.Bucket, creating it (as create says) when it is missing and mayCreate is set
// (survey decides that). It fails when the bucket is missing and may not be created, or cannot carry per-key TTLs.
// An existing bucket is never modified.
func newShard(ctx context.Context, js jetstream.JetStream, cfg Config, create jetstream.KeyValueConfig, mayCreate bool) (*shard, error) {
	w := baseShard(js, cfg)
	w.get = natsreq.NewStreamGet(w.api, w.stream)
	st, err := w.bind(ctx, create, mayCreate)
	if err != nil {
		return nil, err
	}
	info := st.CachedInfo()
	if err := w.compatible(info); err != nil {
		return nil, err
	}
	w.markTTL, w.created, w.leader = info.Config.SubjectDeleteMarkerTTL, info.Created, st
	w.direct.Store(info.Config.AllowDirect)
	w.maxAge.Store(int64(info.Config.MaxAge))
	w.seen.Store(info.State.LastSeq)
	return w, nil
}

func baseShard(js jetstream.JetStream, cfg Config) *shard {
	return &shard{js: js, nc: js.Conn(), cfg: cfg, stream: "KV_" + cfg.Bucket, prefix: "$KV." + cfg.Bucket + ".",
		api: jsapi.Prefix(js.Options())}
}

// lostShard is a shard whose bucket was missing beside its siblings when NewManager bound the window: every call
// on it fails with err (ErrWindowLost), while the window's other buckets answer.
func lostShard(js jetstream.JetStream, cfg Config, err error) *shard {
	w := baseShard(js, cfg)
	w.absent = true
	w.lost.Store(&lostState{err: w.bucketErr(err)})
	return w
}

// gone is the lost error of a shard bound as lost (lostShard), else nil.
func (w *shard) gone() error {
	if w.absent {
		return w.lost.Load().err
	}
	return nil
}

func (w *shard) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.cfg.Timeout)
}

// info reads the bucket's stream info, bounded by Config.Timeout.
func (w *shard) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	st, err := w.js.Stream(ctx, w.stream)
	if err != nil {
		return nil, err
	}
	return st.CachedInfo(), nil
}

// CreateError is the server's refusal to create a bucket of the window: Bucket is the one refused (a shard's, with
// its suffix), so that a caller can name it.
type CreateError struct {
	Bucket string
	Err    error
}

func (e *CreateError) Error() string {
	return fmt.Sprintf("kvwindow: bucket %q: create: %v", e.Bucket, e.Err)
}

func (e *CreateError) Unwrap() error { return e.Err }

func (w *shard) bind(ctx context.Context, create jetstream.KeyValueConfig, mayCreate bool) (jetstream.Stream, error) {
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
			return nil, fmt.Errorf("kvwindow: bucket %q does not exist and provisioning is off: create it (%s) or "+
				"enable Provision", w.cfg.Bucket, kvAdd(w.cfg.Bucket, w.cfg))
		}
		if !mayCreate {
			// New saw the bucket (or its siblings) a moment ago: it went away since, and with it its claims.
			return nil, w.markLost("was deleted while the worker bound to it", false)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("%w: bucket %q: created but not found", ErrUnavailable, w.cfg.Bucket)
		}
		octx, cancel = w.opCtx(ctx)
		_, err = w.js.CreateKeyValue(octx, create)
		cancel()
		// ErrBucketExists: another worker created it meanwhile (perhaps differently); bind and check it.
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			if jserr.Unanswered(err) {
				// No answer in time (a cluster still forming, a busy server): the create may even have been made.
				// The caller retries, and its next bind finds the bucket or creates it. The server also drops a
				// create the user may not send, answering only on the connection: say so, or an operator could
				// wait for a cluster that is fine.
				return nil, fmt.Errorf("%w: bucket %q: create: no answer (a cluster still forming or a busy server; "+
					"or a user that may not publish to %sSTREAM.CREATE.%s, whose request the server drops): %w",
					ErrUnavailable, w.cfg.Bucket, w.api, w.stream, err)
			}
			return nil, &CreateError{Bucket: w.cfg.Bucket, Err: err}
		}
	}
}

// bucketErr is err of this shard's bucket.
func (w *shard) bucketErr(err error) error {
	if err == nil {
		return nil
	}
	return &BucketError{Bucket: w.cfg.Bucket, Err: err}
}

// closedErr is the error of every call once the window is closed, else nil.
func (w *shard) closedErr() error {
	if w.closed.Load() {
		return w.bucketErr(fmt.Errorf("%w: bucket %q: the window was closed", ErrUnavailable, w.cfg.Bucket))
	}
	return nil
}

// usable fails once the window is closed, and with the bucket's ErrWindowLost error once it is known lost.
func (w *shard) usable() error {
	if err := w.closedErr(); err != nil {
		return err
	}
	if l := w.lost.Load(); l != nil {
		return l.err
	}
	return nil
}

// markLost records that the bucket was deleted (recreated false: it may still come back as it was) or created
// again (for good), and returns the error every claim in it now fails with.
func (w *shard) markLost(reason string, recreated bool) error {
	l := &lostState{recreated: recreated, err: w.bucketErr(fmt.Errorf("%w: bucket %q %s, so its claims are gone; "+
		"this worker claims nothing in it until restarted (what to do: OPERATIONS.md#the-window-bucket-was-lost-or-re-created)",
		ErrWindowLost, w.cfg.Bucket, reason))}
	for {
		old := w.lost.Load()
		if old != nil && old.recreated {
			return old.err // the first reason for good stays
		}
		if w.lost.CompareAndSwap(old, l) {
			return l.err
		}
	}
}

// acked checks where a write of ours was stored against seen, taken before it was sent, and raises seen to it. A
// write that proves the claims lost (recreatedAck) takes one stream info read, on that rare branch only, for ackLoss.
func (w *shard) acked(ctx context.Context, pa natsreq.PubAck, seen uint64) error {
	if recreatedAck(w.stream, pa.Stream, pa.Sequence, seen) {
		var created time.Time
		var err error
		if string(pa.Stream) == w.stream {
			var info *jetstream.StreamInfo
			if info, err = w.info(ctx); err == nil {
				created = info.Created
			}
		}
		return w.markLost(ackLoss(w.stream, pa.Stream, pa.Sequence, seen, w.created, created, err), true)
	}
	raise(&w.seen, pa.Sequence)
	return nil
}

// ackLoss says why a write acknowledged in ackStream at seq, at or below seen, shows the claims lost, given the
// creation time bound to and the one read after the write (now, or readErr). With the same creation time the
// bucket lost its latest writes rather than being created again: the claims are lost either way, only words differ.
func ackLoss(stream string, ackStream []byte, seq, seen uint64, bound, now time.Time, readErr error) string {
	stored := fmt.Sprintf("a write was stored at sequence %d of stream %q, at or below sequence %d, which the worker had "+
		"seen in it before sending the write", seq, ackStream, seen)
	switch {
	case string(ackStream) != stream:
		return fmt.Sprintf("was created again under the running worker (%s)", stored)
	case readErr != nil:
		return fmt.Sprintf("was created again under the running worker, or lost its latest writes (%s; its creation "+
			"time could not be read to tell which: %v)", stored, readErr)
	case now.Equal(bound):
		return fmt.Sprintf("lost its latest writes (last sequence back from %d to %d: %s; the same bucket, created %s: "+
			"a replica-1 bucket whose server lost its unsynced writes in a hard crash, or a memory bucket whose server "+
			"restarted)", seen, seq-1, stored, bound.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("was created again under the running worker (%s; now created %s, the worker bound to the one "+
		"created %s)", stored, now.UTC().Format(time.RFC3339Nano), bound.UTC().Format(time.RFC3339Nano))
}

// recreatedAck decides whether a write acknowledged in ackStream at seq proves the bucket's claims lost: it was
// stored in another stream, or at or below seen, the highest sequence seen before it was sent. A stream's sequence
// only grows (purges, expiries and markers never lower it), so in the same stream the write lands above seen. seen
// must be taken before the write is sent: the ack of a later write of ours may arrive first and raise the shard's.
func recreatedAck(stream string, ackStream []byte, seq, seen uint64) bool {
	return string(ackStream) != stream || seq <= seen
}

// raise sets a to v when v is higher.
func raise(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// observe checks the bucket's stream info (or the error asking for it) against the bucket New bound to. A bucket
// not found is lost until it is found again as it was (the answer was wrong, or it was restored); one with another
// creation time is lost for good.
func (w *shard) observe(info *jetstream.StreamInfo, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return w.markLost("was deleted under the running worker", false)
	case err != nil:
		return w.bucketErr(fmt.Errorf("%w: ping bucket %q: %w", ErrUnavailable, w.cfg.Bucket, err))
	case !info.Created.Equal(w.created):
		return w.markLost(fmt.Sprintf("was deleted and created again under the running worker (now created %s; the "+
			"worker bound to the one created %s)", info.Created.UTC().Format(time.RFC3339Nano),
			w.created.UTC().Format(time.RFC3339Nano)), true)
	}
	// The age limit and the discard policy may have been edited since (nats stream edit --max-age, --discard):
	// claims follow them from now on.
	w.maxAge.Store(int64(info.Config.MaxAge))
	w.evicting.Store(evictsClaims(info.Config))
	w.direct.Store(info.Config.AllowDirect)
	raise(&w.seen, info.State.LastSeq) // the bucket as bound: keeps an idle worker's seen up to date
	for {
		l := w.lost.Load()
		if l == nil {
			return nil
		}
		if l.recreated {
			return l.err
		}
		if w.lost.CompareAndSwap(l, nil) {
			return nil
		}
	}
}

// holds fails (ErrAgeLimit) when the bucket's age limit, as last seen, is shorter than c's TTL or Config.MaxTTL.
// With MaxTTL set every claim is refused then, as New would refuse the bucket: a window that took its short claims
// and refused its long ones would look up and down by turns.
func (w *shard) holds(c Claim) error {
	if err := w.evictErr(); err != nil {
		return err
	}
	ttl := time.Duration(c.TTLSeconds()) * time.Second
	maxAge := time.Duration(w.maxAge.Load())
	if maxAge <= 0 || max(ttl, w.cfg.MaxTTL) <= maxAge {
		return nil // ageErr's answer, without building the refusal's text on every claim
	}
	need, what := w.mustHold(ttl, false) // the longer of ttl and MaxTTL: longer than maxAge
	raise(&w.refused, uint64(need))
	return w.ageErr(maxAge, need, what)
}

// mustHold is the longest claim TTL the bucket must hold besides ttl, and how to name it: Config.MaxTTL, or (with
// refused) the longest TTL refused so far when longer, or ttl when longer still. A claim is checked without the
// TTLs refused before it: with MaxTTL not known, a shorter claim the bucket can hold is taken.
func (w *shard) mustHold(ttl time.Duration, refused bool) (time.Duration, string) {
	need, what := w.cfg.MaxTTL, ""
	if need > 0 {
		what = maxTTLWhat(need)
	}
	if r := time.Duration(w.refused.Load()); refused && r > need {
		need, what = r, fmt.Sprintf("the TTL of a claim it refused, %s", r)
	}
	if ttl > need {
		need, what = ttl, fmt.Sprintf("the TTL of this claim, %s", ttl)
	}
	return need, what
}

// ageErr is the ErrAgeLimit error of a bucket whose age limit maxAge is shorter than need (named by what), or nil
// when it is not.
func (w *shard) ageErr(maxAge, need time.Duration, what string) error {
	p := ageProblem(maxAge, need, what)
	if p == "" {
		return nil
	}
	return w.bucketErr(fmt.Errorf("%w: bucket %q: %s; remove its age limit (nats stream edit %s --max-age=0) "+
		"or raise it to at least %s, or shorten the sources' dedupe TTL", ErrAgeLimit, w.cfg.Bucket, p, w.stream, need))
}

// evictsClaims decides whether a bucket's stream may drop live claims to store new ones: a stream that discards
// old messages evicts the oldest claims once it reaches a message or byte limit (its own or, later, one edited in),
// and a copy of an evicted claim's event would be admitted as new. New refuses such a bucket (bucketProblems), and
// a Ping that finds one edited so under the running window makes claims fail (ErrEvicting).
func evictsClaims(c jetstream.StreamConfig) bool {
	return c.Discard != jetstream.DiscardNew
}

// evictErr is the ErrEvicting error while the bucket, as last seen, discards old messages, else nil.
func (w *shard) evictErr() error {
	if !w.evicting.Load() {
		return nil
	}
	return w.bucketErr(fmt.Errorf("%w: bucket %q was edited to discard old messages: once full it evicts live claims, "+
		"and a later copy of their events is published again; put discard new back (nats stream edit %s --discard new); "+
		"claims it evicted meanwhile are gone, as a lost bucket's are", ErrEvicting, w.cfg.Bucket, w.stream))
}

// agedOut fails (ErrAgeLimit) while the bucket's age limit, as last seen, is shorter than Config.MaxTTL or the
// longest TTL a claim was refused for, so that Ping never reports reachable a window refusing claims.
func (w *shard) agedOut() error {
	need, what := w.mustHold(0, true)
	return w.ageErr(time.Duration(w.maxAge.Load()), need, what)
}

// compatible checks that an existing bucket can hold the window's claims (bucketProblems); it never changes it.
func (w *shard) compatible(info *jetstream.StreamInfo) error {
	problems, recreate := bucketProblems(info.Config, w.cfg.MaxTTL)
	if len(problems) == 0 {
		return nil
	}
	fix := fmt.Sprintf("delete and recreate it with per-key TTLs and no age limit (nats kv del %s; %s), "+
		"or delete it and let the worker provision it", w.cfg.Bucket, kvAdd(w.cfg.Bucket, w.cfg))
	if !recreate {
		// An age limit is the one problem an edit of the bucket's stream mends, claims and all.
		fix = fmt.Sprintf("remove its age limit (nats stream edit %s --max-age=0), or raise it to at least %s", w.stream, w.cfg.MaxTTL)
	}
	return fmt.Errorf("kvwindow: bucket %q is not usable as a claim window: %s: %s", w.cfg.Bucket, strings.Join(problems, "; "), fix)
}

// kvAdd is the command that creates a window bucket of cfg by hand: history 1 and a limit marker TTL, so that each
// claim carries its own TTL, no age limit, and the replicas and storage the worker would create it with.
func kvAdd(bucket string, cfg Config) string {
	c := fmt.Sprintf("nats kv add %s --history=1 --marker-ttl=%s --replicas=%d", bucket, cfg.MarkerTTL, cfg.Replicas)
	if cfg.Storage == jetstream.MemoryStorage {
		c += " --storage=memory"
	}
	return c
}

// bucketProblems decides whether a bucket's stream can hold claims of up to maxTTL (0: not known, checked claim by
// claim). It says what is wrong, and whether the bucket must be created again or only its age limit edited.
func bucketProblems(c jetstream.StreamConfig, maxTTL time.Duration) (problems []string, recreate bool) {
	if !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0 {
		problems = append(problems, "it does not support per-key TTLs (allow_msg_ttl and a limit marker TTL are required)")
	}
	if c.MaxMsgsPerSubject != 1 {
		// With history > 1 the server raises every message TTL to at least the marker TTL.
		problems = append(problems, fmt.Sprintf("it keeps history %d (must be 1)", c.MaxMsgsPerSubject))
	}
	if evictsClaims(c) {
		problems = append(problems, "its discard policy is old (a full bucket would evict live claims)")
	}
	if c.Mirror != nil || c.Sealed {
		problems = append(problems, "it is a mirror or sealed (not writable)")
	}
	recreate = len(problems) > 0
	if p := ageProblem(c.MaxAge, maxTTL, maxTTLWhat(maxTTL)); p != "" {
		problems = append(problems, p)
	}
	return problems, recreate
}

// maxTTLWhat names Config.MaxTTL in an age limit's error.
func maxTTLWhat(d time.Duration) string {
	return fmt.Sprintf("the longest claim TTL it must hold, %s (the longest dedupe TTL of the sources; "+
		"DEDUPE_DEFAULT_TTL for those that set none)", d)
}

// ageProblem says why a bucket whose age limit is maxAge (0: none) cannot hold a claim of ttl (named by what), or
// "" when it can: the server removes a message older than max_age whatever its Nats-TTL.
func ageProblem(maxAge, ttl time.Duration, what string) string {
	if maxAge <= 0 || ttl <= maxAge {
		return ""
	}
	return fmt.Sprintf("its age limit (max_age %s) is shorter than %s: the server removes every claim after %s "+
		"whatever its TTL, and a copy of its event arriving later would be published again", maxAge, what, maxAge)
}
