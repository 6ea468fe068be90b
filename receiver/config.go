package receiver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/ident"
)

// JetStream is what the receiver needs of a JetStream context: publishing and looking up the input stream.
type JetStream interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// Config configures a Receiver. Zero values mean the defaults below; docs/receiver.md says what each bound answers.
type Config struct {
	// JetStream publishes the envelopes (required).
	JetStream JetStream
	// Policy says which requests are served and how they are verified (required; NewPolicy).
	Policy *Policy
	// Window is the replay guard's claim window for Policy.Guarded's sources: a kvwindow.Window on a bucket of the
	// guard's own, not the worker's. nil turns the guard off for every source (New logs a warning naming them).
	Window ReplayWindow

	// InputStream must store each envelope: publishes carry Nats-Expected-Stream with it. Default "INGEST".
	InputStream string
	// InputPrefix is the subject prefix of envelopes: <InputPrefix>.<tenant>.<source>. Default "ingest".
	InputPrefix string

	// MaxBody is the largest body accepted, in bytes (413 above). Default 4 MiB: above the worker's default
	// DEDUPE_MAX_JSON_BYTES, so that the worker's too-large outcome stays reachable.
	MaxBody int64
	// MaxHeaderBytes bounds the header block published with a delivery, after filtering and with the receiver's own
	// headers (431 above). Default 32 KiB, at most MaxHeaderBytesLimit. Serve's http.Server reads raw headers up to
	// MaxHeaderBytes + 64 KiB.
	MaxHeaderBytes int
	// PublishTimeout bounds the wait for JetStream's acknowledgement (503 "storage not confirmed" past it) and the
	// replay guard's claim. Default 3s, so that the answer comes within Shopify's 5 s and GitHub's 10 s.
	PublishTimeout time.Duration
	// MaxInFlight bounds the deliveries being verified and published at once (503 busy above). Default 256.
	MaxInFlight int
	// MaxBufferedBytes bounds the body bytes held at once by all requests, counted as they arrive (503 busy past
	// it). Default 64 MiB; at least MaxBody.
	MaxBufferedBytes int64
	// BodyTimeout bounds reading one body from the end of its headers (408 past it). Default 10s: a 4 MiB body at
	// 400 KB/s.
	BodyTimeout time.Duration
	// RetryAfter is the Retry-After of 503 answers, in whole seconds (rounded up). Default 5s.
	RetryAfter time.Duration

	// ReadTimeout bounds reading one request, headers and body (Serve). Default 30s.
	ReadTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown: in-flight requests finish within it, then the rest are
	// cut. Default 30s.
	ShutdownTimeout time.Duration

	// Logger receives the receiver's log lines; nil discards them. Rejections and unavailability are logged at
	// most once per 10 s per kind.
	Logger *slog.Logger
	// Metrics counts requests; nil: NewMetrics(nil) (counted, not registered).
	Metrics *Metrics
	// Gatherer is served on GET /metrics; nil: no /metrics route (404).
	Gatherer prometheus.Gatherer
}

// Defaults of Config.
const (
	DefaultInputStream     = "INGEST"
	DefaultInputPrefix     = contract.DefaultInputPrefix
	DefaultMaxBody         = 4 << 20
	DefaultMaxHeaderBytes  = 32 << 10
	DefaultPublishTimeout  = 3 * time.Second
	DefaultMaxInFlight     = 256
	DefaultMaxBuffered     = 64 << 20
	DefaultBodyTimeout     = 10 * time.Second
	DefaultRetryAfter      = 5 * time.Second
	DefaultReadTimeout     = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// MaxHeaderBytesLimit is the largest MaxHeaderBytes: JetStream refuses a header block over 65535 bytes (error
// 10097); 1 KiB is left for what a client library or the server may add.
const MaxHeaderBytesLimit = 65535 - 1023

// WithDefaults returns cfg with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.InputStream = cmp.Or(c.InputStream, DefaultInputStream)
	c.InputPrefix = cmp.Or(c.InputPrefix, DefaultInputPrefix)
	c.MaxBody = cmp.Or(c.MaxBody, DefaultMaxBody)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, DefaultPublishTimeout)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.MaxBufferedBytes = cmp.Or(c.MaxBufferedBytes, max(DefaultMaxBuffered, c.MaxBody))
	c.BodyTimeout = cmp.Or(c.BodyTimeout, DefaultBodyTimeout)
	c.RetryAfter = cmp.Or(c.RetryAfter, DefaultRetryAfter)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}

// Validate checks a Config (after WithDefaults) and joins every problem, each naming its field.
func (c Config) Validate() error {
	var errs []error
	for _, r := range []struct {
		bad         bool
		field, text string
	}{
		{c.JetStream == nil, "JetStream", "required"},
		{c.Policy == nil, "Policy", "required (NewPolicy)"},
		{!ident.ValidName(c.InputStream), "InputStream",
			fmt.Sprintf("must be 1-255 characters of [A-Za-z0-9_-], got %q", c.InputStream)},
		{!ident.ValidPrefix(c.InputPrefix), "InputPrefix",
			fmt.Sprintf("must be dot-separated tokens of [A-Za-z0-9_-] without wildcards, got %q", c.InputPrefix)},
		{c.MaxBody < 1 || c.MaxBody > 1<<30, "MaxBody", fmt.Sprintf("must be between 1 and %d bytes, got %d", 1<<30, c.MaxBody)},
		{c.MaxHeaderBytes < 1024 || c.MaxHeaderBytes > MaxHeaderBytesLimit, "MaxHeaderBytes", fmt.Sprintf(
			"must be between 1024 and %d bytes (JetStream stores header blocks of at most 65535 bytes), got %d", MaxHeaderBytesLimit, c.MaxHeaderBytes)},
		{c.PublishTimeout < 10*time.Millisecond, "PublishTimeout", fmt.Sprintf("must be at least 10ms, got %s", c.PublishTimeout)},
		{c.MaxInFlight < 1 || c.MaxInFlight > 65536, "MaxInFlight", fmt.Sprintf("must be between 1 and 65536, got %d", c.MaxInFlight)},
		{c.MaxBufferedBytes < c.MaxBody || c.MaxBufferedBytes > 1<<40, "MaxBufferedBytes", fmt.Sprintf(
			"must be at least MaxBody (%d) and at most %d bytes, got %d", c.MaxBody, int64(1)<<40, c.MaxBufferedBytes)},
		{c.BodyTimeout < 100*time.Millisecond, "BodyTimeout", fmt.Sprintf("must be at least 100ms, got %s", c.BodyTimeout)},
		{c.RetryAfter < 0, "RetryAfter", fmt.Sprintf("must not be negative, got %s", c.RetryAfter)},
		{c.ReadTimeout < time.Second, "ReadTimeout", fmt.Sprintf("must be at least 1s, got %s", c.ReadTimeout)},
		{c.ShutdownTimeout <= 0, "ShutdownTimeout", fmt.Sprintf("must be positive, got %s", c.ShutdownTimeout)},
	} {
		if r.bad {
			errs = append(errs, fmt.Errorf("receiver: config: %s: %s", r.field, r.text))
		}
	}
	return errors.Join(errs...)
}
