package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/ident"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// Window is the claim window the pipeline needs; *kvwindow.Window implements it (and so does the in-memory
// windowtest.Memory). Claim must bound its own duration (kvwindow.Config.Timeout) and report a window that cannot
// decide with an error wrapping kvwindow.ErrUnavailable.
type Window interface {
	Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error)
	// Release replaces c's claim, while still at revision rev, by a release marker naming c's envelope
	// (mayBeStored: the event may be in the output), for an event claimed and then dead-lettered.
	Release(ctx context.Context, c kvwindow.Claim, rev uint64, mayBeStored bool) (bool, error)
	// MarkPublished records in the claim (still at revision rev) that its event was published: a later delivery
	// finds Owned with Published, a waiting copy Duplicate with Published.
	MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, firstClaimed time.Time) (newRev uint64, ok bool, err error)
	// Get reads the live claim on the key from the stream leader: for a copy whose holder has left the input
	// stream, a key still holding the claim it found shows that the holder left published.
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
	// JetStream is the handle used to consume, publish and (with Provision) create streams. Required.
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

	// Provision creates missing streams and the consumer when Run starts (existing ones are checked, and changed
	// only as MaxAckPending says); DefaultConfig sets it.
	Provision bool
	// Replicas is the replication factor of streams and the consumer that Provision creates. Default 1.
	Replicas int
	// OutputMaxAge and DLQMaxAge are the age limits of the output and dead-letter streams Provision creates.
	// Defaults 7 days and 30 days.
	OutputMaxAge, DLQMaxAge time.Duration
	// OutputDuplicates is the duplicate window of the output stream Provision creates, and of the dead-letter
	// stream (at most DLQMaxAge). Default max(2m, 4×AckWait); at least AckWait. Its cost in the server's memory:
	// docs/failures.md.
	OutputDuplicates time.Duration
	// ConsumerStart says where a consumer that Provision creates on an input stream that keeps processed
	// envelopes starts: "all", "new", "seq:<n>" or "time:<RFC 3339>" (see ErrConsumerStart); ignored, with a
	// warning, on a work-queue stream.
	ConsumerStart string
	// MaxHold bounds how long a delivery may be held before it is published; past it the delivery is handed back
	// (NAK) and its redelivery publishes. Zero (the default): half of the output stream's duplicate window.
	MaxHold time.Duration
	// MaxInFlight bounds the envelopes being processed at once. Default 1024.
	MaxInFlight int
	// MaxAckPending is the consumer's limit of unacknowledged envelopes, for the whole fleet. Zero (the default):
	// ConsumerMaxAckPending at creation, an existing consumer left as it is; set, an existing consumer is updated.
	MaxAckPending int
	// AckWait is the consumer's ack wait when Provision creates it. Default 30s.
	AckWait time.Duration
	// PublishTimeout bounds the wait for JetStream's ack of one publish; a timeout is retried (NAK). Default 10s.
	PublishTimeout time.Duration
	// ForwardWhenWindowDown forwards envelopes unkeyed (reason window-unavailable) while the window cannot be
	// reached, instead of holding them back (the default: an outage delays events, never duplicates them).
	ForwardWhenWindowDown bool

	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the pipeline's metrics. Default: NewMetrics(nil), not registered anywhere.
	Metrics *Metrics
	// StatusInterval is how often the consumer's pending count and the window's health are refreshed. Default 2s.
	StatusInterval time.Duration
	// ShutdownTimeout bounds Run's shutdown, counted from the cancellation of its context (see Run). Default 30s.
	ShutdownTimeout time.Duration

	placementStuckAfter time.Duration // jserr.PlacementStuckAfter when zero; shorter in tests
}

// DefaultConfig returns the defaults, including Provision: true. JetStream and Window still have to be set.
func DefaultConfig() Config { return Config{Provision: true}.WithDefaults() }

// WithDefaults returns c with zero-valued fields set to their defaults (booleans are left as they are).
func (c Config) WithDefaults() Config {
	c.InputStream, c.InputPrefix = cmp.Or(c.InputStream, DefaultInputStream), cmp.Or(c.InputPrefix, DefaultInputPrefix)
	c.OutputStream, c.OutputPrefix = cmp.Or(c.OutputStream, DefaultOutputStream), cmp.Or(c.OutputPrefix, DefaultOutputPrefix)
	c.DLQStream, c.DLQPrefix = cmp.Or(c.DLQStream, DefaultDLQStream), cmp.Or(c.DLQPrefix, DefaultDLQPrefix)
	c.Consumer = cmp.Or(c.Consumer, DefaultConsumer)
	c.DefaultTTL = cmp.Or(c.DefaultTTL, keys.DefaultTTL)
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, DefaultPublishTimeout)
	c.StatusInterval = cmp.Or(c.StatusInterval, DefaultStatusInterval)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.OutputDuplicates = cmp.Or(c.OutputDuplicates, duplicateWindow(c.AckWait))
	c.OutputMaxAge = cmp.Or(c.OutputMaxAge, DefaultOutputMaxAge)
	c.DLQMaxAge = cmp.Or(c.DLQMaxAge, DefaultDLQMaxAge)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}

// Validate checks c (after defaults). Errors start with "pipeline: " and name the field.
func (c Config) Validate() error {
	if c.JetStream == nil {
		return errors.New("pipeline: JetStream: is required")
	}
	if c.Window == nil {
		return errors.New("pipeline: Window: is required")
	}
	type field struct{ name, v string }
	names := []field{{"InputStream", c.InputStream}, {"OutputStream", c.OutputStream}, {"DLQStream", c.DLQStream},
		{"Consumer", c.Consumer}}
	for _, f := range names {
		if !ident.ValidName(f.v) {
			return fmt.Errorf("pipeline: %s: must be 1-255 characters of [A-Za-z0-9_-], got %q", f.name, f.v)
		}
	}
	if c.InputStream == c.OutputStream || c.InputStream == c.DLQStream || c.OutputStream == c.DLQStream {
		return fmt.Errorf("pipeline: InputStream, OutputStream and DLQStream must differ, got %q, %q and %q",
			c.InputStream, c.OutputStream, c.DLQStream)
	}
	prefixes := []field{{"InputPrefix", c.InputPrefix}, {"OutputPrefix", c.OutputPrefix}, {"DLQPrefix", c.DLQPrefix}}
	if c.DuplicatesPrefix != "" {
		prefixes = append(prefixes, field{"DuplicatesPrefix", c.DuplicatesPrefix})
	}
	for _, f := range prefixes {
		if !ident.ValidPrefix(f.v) {
			return fmt.Errorf("pipeline: %s: must be dot-separated tokens of [A-Za-z0-9_-] without wildcards, got %q", f.name, f.v)
		}
	}
	for i, a := range prefixes {
		for _, b := range prefixes[i+1:] {
			if ident.Overlaps(a.v, b.v) {
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
		{c.MaxAckPending < 0, "MaxAckPending: must not be negative", c.MaxAckPending},
		{c.MaxHold < 0, "MaxHold: must not be negative", c.MaxHold},
	} {
		if r.bad {
			return fmt.Errorf("pipeline: %s, got %v", r.msg, r.v)
		}
	}
	if _, err := parseConsumerStart(c.ConsumerStart); err != nil {
		return err
	}
	if c.Logger == nil {
		return errors.New("pipeline: Logger: is required")
	}
	if c.Metrics == nil {
		return errors.New("pipeline: Metrics: is required")
	}
	return nil
}

// duplicateWindow is the default output duplicate window: a republish after a lost ack (AckWait) still collapses.
func duplicateWindow(ackWait time.Duration) time.Duration {
	return max(2*time.Minute, 4*ackWait)
}

// DefaultFleet is the number of replicas the default MaxAckPending leaves room for: each replica keeps up to
// MaxInFlight envelopes delivered and unacknowledged, so a smaller limit would leave added replicas idle.
const DefaultFleet = 10

// ConsumerMaxAckPending is the MaxAckPending Provision creates the consumer with for cfg: cfg.MaxAckPending when
// set, else room for DefaultFleet replicas of MaxInFlight each, at least 1000.
func ConsumerMaxAckPending(cfg Config) int {
	if cfg.MaxAckPending > 0 {
		return cfg.MaxAckPending
	}
	return max(1000, DefaultFleet*cmp.Or(cfg.MaxInFlight, DefaultMaxInFlight))
}
