package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// Window is the claim window the pipeline needs; *kvwindow.Window implements it (and so does the in-memory
// windowtest.Memory). Claim must bound its own duration (kvwindow.Config.Timeout) and report a window that cannot
// decide with an error wrapping kvwindow.ErrUnavailable.
type Window interface {
	Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error)
	// Release replaces c's claim on the key, only while it is still at revision rev (the caller's own claim), by
	// a release marker naming c's envelope (mayBeStored: saying the event may be in the output). The pipeline
	// calls it only for an event it claimed and then had to dead-letter because the output stream refused it for
	// good, so that a well-formed copy of the event is admitted (and a later delivery of the same envelope is told
	// DeadLettered instead of holding the key again).
	Release(ctx context.Context, c kvwindow.Claim, rev uint64, mayBeStored bool) (bool, error)
	// MarkPublished records in the claim (still at revision rev) that its event was published, so that a later
	// delivery finds Owned with Published and does not publish again, and a copy waiting for the holder (a
	// Duplicate without Published) is acknowledged. The pipeline calls it after every keyed publish, before the ack.
	MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, firstClaimed time.Time) (newRev uint64, ok bool, err error)
	// Get reads the live claim on the key from the stream leader. The pipeline calls it for a copy whose claim's
	// holder has left the input stream, before acknowledging the copy: only a key still holding the claim the copy
	// found shows that the holder left published (a holder that dead-letters releases its claim first).
	Get(ctx context.Context, tenant, source, key string) (kvwindow.Entry, bool, error)
	Ping(ctx context.Context) error
}

// Defaults applied by New (and WithDefaults) to zero-valued Config fields.
const (
	DefaultInputStream     = "INGEST"
	DefaultInputPrefix     = contract.DefaultInputPrefix
	DefaultOutputStream    = "DEDUPED"
	DefaultOutputPrefix    = contract.DefaultOutputPrefix
	DefaultDLQStream       = "DEDUPE_DLQ"
	DefaultDLQPrefix       = contract.DefaultDLQPrefix
	DefaultConsumer        = "dedupeworker"
	DefaultReplicas        = 1
	DefaultMaxInFlight     = 1024
	DefaultAckWait         = 30 * time.Second
	DefaultPublishTimeout  = 10 * time.Second
	DefaultStatusInterval  = 2 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultOutputMaxAge    = 7 * 24 * time.Hour
	DefaultDLQMaxAge       = 30 * 24 * time.Hour
)

// Config configures a Pipeline. Start from DefaultConfig (which also sets Provision) or leave fields zero for their
// defaults.
type Config struct {
	// JetStream is the handle used to consume, publish and (with Provision) create streams. Required. Its
	// connection carries the pipeline's own pull subscription and the answers to its acks and publishes.
	JetStream jetstream.JetStream
	// Window records claims. Required.
	Window Window
	// Sources declares the dedupe spec of each source; an undeclared source is forwarded unkeyed (no-dedupe).
	Sources keys.Sources
	// Extractor finds event keys (zero value: 1 MiB JSON limit).
	Extractor keys.Extractor
	// DefaultTTL is the claim TTL of a source whose spec sets none. Default keys.DefaultTTL.
	DefaultTTL time.Duration

	// InputStream captures "<InputPrefix>.<tenant>.<source>". Defaults INGEST and ingest.
	InputStream, InputPrefix string
	// OutputStream captures "<OutputPrefix>.<tenant>.<source>" (and the duplicate copies). Defaults DEDUPED and
	// deduped.
	OutputStream, OutputPrefix string
	// DLQStream captures "<DLQPrefix>.<reason>". Defaults DEDUPE_DLQ and dedupe.dlq.
	DLQStream, DLQPrefix string
	// DuplicatesPrefix, when set, receives a copy of every duplicate at "<DuplicatesPrefix>.<tenant>.<source>"
	// (captured by OutputStream). Empty (the default): duplicates are only counted.
	DuplicatesPrefix string
	// Consumer is the durable pull consumer on InputStream that all replicas share. Default dedupeworker.
	Consumer string
	// CopiesStream, when set, is the counter stream in which each claim counts the copies it suppressed
	// (kvwindow.CopiesStream of the window's bucket; Provision creates it). Empty (the default): not counted.
	CopiesStream string

	// Provision creates missing streams and the consumer when Run starts (existing ones are checked, never
	// changed). The zero value (false) only binds to what exists; DefaultConfig sets it to true.
	Provision bool
	// Replicas is the replication factor of streams and the consumer that Provision creates. Default 1.
	Replicas int
	// OutputMaxAge and DLQMaxAge are the age limits of the output and dead-letter streams that Provision creates
	// (existing streams are not changed). Defaults 7 days and 30 days.
	OutputMaxAge, DLQMaxAge time.Duration
	// OutputDuplicates is the duplicate window of the output stream Provision creates (an existing stream is never
	// changed). Default max(2m, 4×AckWait); at least AckWait. A longer window catches a republish further apart
	// from the first publish, at a cost in the server's memory: it keeps every Nats-Msg-Id published within the
	// window (about 150–250 bytes each: docs/failures.md, "When never published twice holds").
	OutputDuplicates time.Duration
	// ConsumerStart says where a consumer that Provision creates on an input stream that keeps processed
	// envelopes (any retention but work-queue) starts: "all", "new", "seq:<n>" or "time:<RFC 3339>". Empty (the
	// default): such a consumer is created only while the stream is empty; on a non-empty one Provision fails with
	// ErrConsumerStart rather than deliver processed envelopes again. It is used only by Provision and when Run
	// starts: a consumer deleted under the running pipeline is not created again from it (ErrConsumerStart). A
	// work-queue input stream (what Provision creates) holds only unprocessed envelopes, so its consumer always
	// starts at the first one, and ConsumerStart is ignored there (logged at warn).
	ConsumerStart string
	// MaxHold bounds how long a delivery may be held before it is published; past it the delivery is handed back
	// (NAK) and its redelivery publishes. Zero (the default): half of the output stream's duplicate window.
	MaxHold time.Duration
	// MaxInFlight bounds the envelopes being processed at once. Default 1024.
	MaxInFlight int
	// MaxAckPending is the consumer's limit of delivered, unacknowledged envelopes: for the whole fleet, since every
	// replica shares the consumer. Zero (the default): a consumer Provision creates gets DefaultFleet ×
	// MaxInFlight, and an existing one is left as it is. Set, it is what Provision creates, and an existing
	// consumer with another value has that one field updated (logged).
	MaxAckPending int
	// AckWait is the consumer's ack wait when Provision creates it. Default 30s.
	AckWait time.Duration
	// PublishTimeout bounds the wait for JetStream's ack of one publish; a timeout is retried (NAK). Default 10s.
	PublishTimeout time.Duration
	// ForwardWhenWindowDown forwards envelopes unkeyed (reason window-unavailable) while the window cannot be
	// reached, instead of holding them back. Off by default: a window outage then delays events, it never
	// duplicates them.
	ForwardWhenWindowDown bool

	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the pipeline's metrics. Default: NewMetrics(nil), not registered anywhere.
	Metrics *Metrics
	// StatusInterval is how often the consumer's pending count and the window's health are refreshed. Default 2s.
	StatusInterval time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight envelopes once its context is cancelled. Default
	// 30s.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the defaults, including Provision: true. JetStream and Window still have to be set.
func DefaultConfig() Config {
	c := Config{Provision: true}.WithDefaults()
	return c
}

// WithDefaults returns c with zero-valued fields set to their defaults (booleans are left as they are).
func (c Config) WithDefaults() Config {
	for _, f := range []struct {
		p *string
		v string
	}{
		{&c.InputStream, DefaultInputStream}, {&c.InputPrefix, DefaultInputPrefix},
		{&c.OutputStream, DefaultOutputStream}, {&c.OutputPrefix, DefaultOutputPrefix},
		{&c.DLQStream, DefaultDLQStream}, {&c.DLQPrefix, DefaultDLQPrefix}, {&c.Consumer, DefaultConsumer},
	} {
		orDefault(f.p, f.v)
	}
	orDefault(&c.DefaultTTL, keys.DefaultTTL)
	orDefault(&c.Replicas, DefaultReplicas)
	orDefault(&c.MaxInFlight, DefaultMaxInFlight)
	orDefault(&c.AckWait, DefaultAckWait)
	orDefault(&c.PublishTimeout, DefaultPublishTimeout)
	orDefault(&c.StatusInterval, DefaultStatusInterval)
	orDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	orDefault(&c.OutputDuplicates, duplicateWindow(c.AckWait))
	orDefault(&c.OutputMaxAge, DefaultOutputMaxAge)
	orDefault(&c.DLQMaxAge, DefaultDLQMaxAge)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}

// orDefault sets *p to v when it is the zero value.
func orDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Validate checks c (after defaults). Errors start with "pipeline: " and name the field.
func (c Config) Validate() error {
	if c.JetStream == nil {
		return errors.New("pipeline: JetStream: is required")
	}
	if c.Window == nil {
		return errors.New("pipeline: Window: is required")
	}
	names := []struct{ name, v string }{
		{"InputStream", c.InputStream}, {"OutputStream", c.OutputStream}, {"DLQStream", c.DLQStream},
		{"Consumer", c.Consumer},
	}
	if c.CopiesStream != "" {
		names = append(names, struct{ name, v string }{"CopiesStream", c.CopiesStream})
	}
	for _, f := range names {
		if !validName(f.v) {
			return fmt.Errorf("pipeline: %s: %q is not a valid name (1-255 characters, no whitespace, '.', '*', '>', '/' or '\\')", f.name, f.v)
		}
	}
	if c.InputStream == c.OutputStream || c.InputStream == c.DLQStream || c.OutputStream == c.DLQStream {
		return fmt.Errorf("pipeline: InputStream, OutputStream and DLQStream must differ, got %q, %q and %q",
			c.InputStream, c.OutputStream, c.DLQStream)
	}
	prefixes := []struct{ name, v string }{
		{"InputPrefix", c.InputPrefix}, {"OutputPrefix", c.OutputPrefix}, {"DLQPrefix", c.DLQPrefix},
	}
	if c.DuplicatesPrefix != "" {
		prefixes = append(prefixes, struct{ name, v string }{"DuplicatesPrefix", c.DuplicatesPrefix})
	}
	for _, f := range prefixes {
		if !validPrefix(f.v) {
			return fmt.Errorf("pipeline: %s: %q is not a valid subject prefix (dot-separated tokens, no wildcards or whitespace)", f.name, f.v)
		}
	}
	for i, a := range prefixes {
		for _, b := range prefixes[i+1:] {
			if a.v == b.v || strings.HasPrefix(a.v, b.v+".") || strings.HasPrefix(b.v, a.v+".") {
				return fmt.Errorf("pipeline: %s: %q overlaps %s %q", b.name, b.v, a.name, a.v)
			}
		}
	}
	for _, r := range []struct {
		bad bool
		msg string
		v   any
	}{
		{c.DefaultTTL < time.Second, "DefaultTTL: must be at least 1s", c.DefaultTTL},
		{c.Replicas < 1 || c.Replicas > 5, "Replicas: must be between 1 and 5", c.Replicas},
		{c.MaxInFlight < 1 || c.MaxInFlight > 1<<16, "MaxInFlight: must be between 1 and 65536", c.MaxInFlight},
		{c.AckWait < time.Second, "AckWait: must be at least 1s", c.AckWait},
		{c.PublishTimeout <= 0, "PublishTimeout: must be positive", c.PublishTimeout},
		{c.StatusInterval <= 0, "StatusInterval: must be positive", c.StatusInterval},
		{c.ShutdownTimeout <= 0, "ShutdownTimeout: must be positive", c.ShutdownTimeout},
		{c.OutputDuplicates < c.AckWait, "OutputDuplicates: must be at least AckWait " + c.AckWait.String(), c.OutputDuplicates},
		{c.OutputMaxAge < c.OutputDuplicates, "OutputMaxAge: must be at least the output's duplicate window " +
			c.OutputDuplicates.String(), c.OutputMaxAge},
		{c.DLQMaxAge < time.Minute, "DLQMaxAge: must be at least 1m", c.DLQMaxAge},
	} {
		if r.bad {
			return fmt.Errorf("pipeline: %s, got %v", r.msg, r.v)
		}
	}
	if _, err := parseConsumerStart(c.ConsumerStart); err != nil {
		return err
	}
	if c.MaxAckPending < 0 {
		return fmt.Errorf("pipeline: MaxAckPending: must not be negative, got %d", c.MaxAckPending)
	}
	if c.MaxHold < 0 {
		return fmt.Errorf("pipeline: MaxHold: must not be negative, got %s", c.MaxHold)
	}
	if c.Logger == nil {
		return errors.New("pipeline: Logger: is required")
	}
	if c.Metrics == nil {
		return errors.New("pipeline: Metrics: is required")
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	return !strings.ContainsAny(s, " \t\r\n.*>/\\")
}

func validPrefix(s string) bool {
	if s == "" || len(s) > 255 || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// duplicateWindow is the output stream's duplicate window Provision uses: comfortably longer than the ack wait,
// so that a republish after a lost ack (redelivered after AckWait) still collapses.
func duplicateWindow(ackWait time.Duration) time.Duration {
	return max(2*time.Minute, 4*ackWait)
}

// DefaultFleet is the number of replicas the default MaxAckPending leaves room for: each replica keeps up to
// MaxInFlight envelopes delivered and unacknowledged, so a smaller limit would leave added replicas idle.
const DefaultFleet = 10

// maxAckPending is the consumer's MaxAckPending Provision uses.
func maxAckPending(cfg Config) int {
	if cfg.MaxAckPending > 0 {
		return cfg.MaxAckPending
	}
	return max(1000, DefaultFleet*cfg.MaxInFlight)
}
