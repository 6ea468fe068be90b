package kvwindow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// CopiesStream is the name of the counter stream of the window whose bucket is bucket (Config.Bucket):
// "<bucket>-copies", one for every shard. The copies a claim suppressed are counted there, never in the window: a
// write on the claim's own key would move the revision its holder's record and release expect.
func CopiesStream(bucket string) string { return bucket + "-copies" }

// ErrNoCopies is wrapped by the errors that mean the counter stream does not exist (deleted, or never created:
// provisioning off, or a deployment older than the count).
var ErrNoCopies = errors.New("no counter stream")

// CopiesStreamConfig is the counter stream ProvisionCopies creates.
type CopiesStreamConfig struct {
	Name     string // CopiesStream(bucket)
	Replicas int
	Storage  jetstream.StorageType
	// MaxAge removes a claim's counter once nothing was counted on it for that long: at least the longest claim
	// TTL, so that a count lasts as long as its claim can.
	MaxAge time.Duration
	// Duplicates is the window within which two increments of one copy count once.
	Duplicates time.Duration
}

func (c CopiesStreamConfig) stream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              c.Name,
		Description:       "dedupeworker: how many copies each claim of the dedupe window suppressed (one counter per claim)",
		Subjects:          []string{c.Name + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: 1,
		MaxAge:            c.MaxAge,
		Duplicates:        min(c.Duplicates, c.MaxAge),
		Storage:           c.Storage,
		Replicas:          max(1, c.Replicas),
		AllowMsgCounter:   true,
		AllowDirect:       true,
	}
}

// ProvisionCopies creates the counter stream when it is missing and reports whether it did. An existing stream is
// never changed: problems lists what keeps it from counting as it should (not a counter stream, subjects that
// do not capture the counters, an age limit shorter than cfg's), each with the command that fixes it.
func ProvisionCopies(ctx context.Context, js jetstream.JetStream, cfg CopiesStreamConfig) (created bool, problems []string, err error) {
	want := cfg.stream()
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		var st jetstream.Stream
		st, err = js.CreateStream(ctx, want)
		if err == nil {
			if !st.CachedInfo().Config.AllowMsgCounter {
				// A server before 2.12 drops the setting it does not know and creates a plain stream, which would
				// store every increment as an empty message and count nothing.
				return true, []string{fmt.Sprintf("stream %s was created without counting (allow_msg_counter): the server "+
					"predates counter streams (nats-server 2.12 or later); nothing is counted", cfg.Name)}, nil
			}
			return true, nil, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		s, err = js.Stream(ctx, cfg.Name) // another worker created it first
	}
	if err != nil {
		return false, nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	got := s.CachedInfo().Config
	if !got.AllowMsgCounter {
		problems = append(problems, fmt.Sprintf("stream %s is not a counter stream (allow_msg_counter): every count is refused; "+
			"delete it (nats stream rm %s) and restart a worker to create it", cfg.Name, cfg.Name))
	}
	if !slices.Contains(got.Subjects, want.Subjects[0]) && !slices.Contains(got.Subjects, ">") {
		problems = append(problems, fmt.Sprintf("stream %s has subjects %q, which do not capture %s: every count is refused; "+
			"delete it (nats stream rm %s) and restart a worker to create it", cfg.Name, got.Subjects, want.Subjects[0], cfg.Name))
	}
	if got.MaxAge > 0 && got.MaxAge < want.MaxAge {
		problems = append(problems, fmt.Sprintf("stream %s removes a claim's count %s after its last copy, before the longest claim "+
			"(%s) can end: raise it (nats stream edit %s --max-age %s)", cfg.Name, got.MaxAge, want.MaxAge, cfg.Name, want.MaxAge))
	}
	return false, problems, nil
}

// copiesSubject is the subject of the counter of the claim holder holds on (tenant, source, key):
// "<stream>.<KV key>.<holder seq>.<holder stamp>", so that a later claim of the key by another envelope counts
// from 0. The stream keeps each subject's last message (the total), and its age limit removes a counter once no
// copy was counted for that long (counter streams take no per-message TTL).
func copiesSubject(dst []byte, stream, tenant, source, key string, holder Claimant) []byte {
	dst = append(dst, stream...)
	dst = append(dst, '.')
	dst = appendKVKey(dst, tenant, source, key)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, holder.Seq, 10)
	dst = append(dst, '.')
	return strconv.AppendInt(dst, holder.Stamp, 10)
}

// CopyCounter counts copies into the counter stream without waiting for the server: an increment's answer comes
// later, to the report function. Close ends its JetStream context's answer subscription.
type CopyCounter struct {
	js         jetstream.JetStream
	stream     string
	maxPending int
}

// CopyCounterConfig configures NewCopyCounter.
type CopyCounterConfig struct {
	Stream string // CopiesStream(bucket)
	// Timeout is how long an increment's answer is awaited before report is told it timed out.
	Timeout time.Duration
	// MaxPending bounds the increments awaiting their answer; Add drops the ones beyond it (ErrCopiesBusy).
	MaxPending int
	// Report receives every increment's answer: nil when stored (or recognised as already counted), else why not
	// (wrapping ErrNoCopies when the stream does not exist). It is called from the client's answer goroutine (or
	// a timer's) and must not block.
	Report func(error)
}

// ErrCopiesBusy is Add's error when MaxPending increments already await their answer: the copy is not counted.
var ErrCopiesBusy = errors.New("too many counts awaiting the server's answer; copy not counted")

// NewCopyCounter returns a counter publishing on nc.
func NewCopyCounter(nc *nats.Conn, cfg CopyCounterConfig) (*CopyCounter, error) {
	report := cfg.Report
	if report == nil {
		report = func(error) {}
	}
	if cfg.MaxPending < 1 {
		cfg.MaxPending = 4096
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.Timeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			if errors.Is(err, jetstream.ErrJetStreamPublisherClosed) {
				return // Close: its caller stopped counting
			}
			if errors.Is(err, jetstream.ErrNoStreamResponse) {
				err = fmt.Errorf("no stream captures %s.> (nats stream info %s): %w: %w", cfg.Stream, cfg.Stream, ErrNoCopies, err)
			}
			report(err)
		}),
		jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { report(nil) }),
	)
	if err != nil {
		return nil, err
	}
	return &CopyCounter{js: js, stream: cfg.Stream, maxPending: cfg.MaxPending}, nil
}

// Incr headers: every increment adds one.
var incrOne = []string{"+1"}

// Add counts one copy, the envelope cp, of the event whose claim on (tenant, source, key) holder holds. cp is the
// increment's Nats-Msg-Id, so that two deliveries of one copy within the duplicate window count once. It never
// waits: an error means the increment was not sent; the server's answer goes to the report function.
func (c *CopyCounter) Add(tenant, source, key string, holder, cp Claimant) error {
	if c.js.PublishAsyncPending() >= c.maxPending {
		return ErrCopiesBusy
	}
	subj := copiesSubject(make([]byte, 0, len(c.stream)+len(tenant)+len(source)+80), c.stream, tenant, source, key, holder)
	id := make([]byte, 0, 48)
	id = strconv.AppendUint(id, cp.Seq, 10)
	id = append(id, '.')
	id = strconv.AppendInt(id, cp.Stamp, 10)
	m := &nats.Msg{Subject: string(subj), Header: nats.Header{
		"Nats-Incr":           incrOne,
		jetstream.MsgIDHeader: {string(id)},
	}}
	// A nanosecond's stall: at the limit the copy goes uncounted rather than wait.
	_, err := c.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Nanosecond))
	if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		return ErrCopiesBusy
	}
	return err
}

// Close ends the counter's answer subscription; increments still awaiting their answer are not reported.
func (c *CopyCounter) Close() { c.js.CleanupPublisher() }

// Copies reads how many copies the claim e (as Manager.Get returned it) has suppressed so far, from the counter
// stream of js (direct get, any replica): 0 when none was counted. A missing stream is an error wrapping
// ErrNoCopies.
func Copies(ctx context.Context, js jetstream.JetStream, stream string, e Entry) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, fmt.Errorf("stream %s does not exist: %w", stream, ErrNoCopies)
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	if !s.CachedInfo().Config.AllowMsgCounter {
		return 0, fmt.Errorf("stream %s is not a counter stream", stream)
	}
	subj := copiesSubject(nil, stream, e.Tenant, e.Source, e.Key, e.Claimant)
	m, err := s.GetLastMsgForSubject(ctx, string(subj))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: read %s: %w", stream, subj, err)
	}
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return 0, fmt.Errorf("stream %s: %s holds no counter: %w", stream, subj, err)
	}
	n, err := strconv.ParseUint(v.Val, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %s holds no count (%q): %w", stream, subj, v.Val, err)
	}
	return n, nil
}
