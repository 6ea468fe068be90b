package receiver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/contract"
)

// JetStream is what the receiver needs of a JetStream context: publishing an envelope and looking up the input
// stream (readiness). jetstream.JetStream has both.
type JetStream interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	Stream(ctx context.Context, name string) (jetstream.Stream, error)
}

// Config configures a Receiver. Zero values mean the defaults below.
type Config struct {
	// JetStream publishes the envelopes (required).
	JetStream JetStream
	// Policy says which requests are served and how they are verified (required; NewPolicy).
	Policy *Policy
	// Window is the claim window the replay guard records the verified bodies of Policy.Guarded's sources in
	// (docs/sources.md, "The replay guard"): a kvwindow.Window on a bucket of the guard's own (`dedupeworker ingest` uses
	// <DEDUPE_BUCKET>-replay), not the worker's. nil turns the guard off for every source (New logs a warning
	// naming them); `dedupeworker ingest` always sets it when a source is guarded.
	Window ReplayWindow

	// InputStream is the stream that must store each envelope: publishes carry Nats-Expected-Stream with it, so
	// that no other stream can acknowledge one. Default "INGEST".
	InputStream string
	// InputPrefix is the subject prefix of envelopes: <InputPrefix>.<tenant>.<source>. Default "ingest".
	InputPrefix string

	// MaxBody is the largest body accepted, in bytes (413 above). Default 4 MiB: above the worker's default
	// DEDUPE_MAX_JSON_BYTES (1 MiB), so that the worker's too-large outcome stays reachable. The NATS server's
	// max_payload bounds it too (413 as well).
	MaxBody int64
	// MaxHeaderBytes bounds the header block published with a delivery (name, ": ", value and CRLF per value,
	// after filtering, with the receiver's Ingest-Verified and Nats-Expected-Stream): 431 above. Default 32 KiB, at
	// most MaxHeaderBytesLimit. The http.Server of Serve reads request headers up to MaxHeaderBytes + 64 KiB (raw,
	// before filtering) and answers net/http's own 431 beyond; both are counted as headers_too_large.
	MaxHeaderBytes int
	// PublishTimeout bounds the wait for JetStream's acknowledgement; past it the answer is 503 "storage not
	// confirmed" (the envelope may have been stored). Default 3s, so that the answer comes within Shopify's 5 s and
	// GitHub's 10 s. It bounds the replay guard's claim too; when that of a delivery without an id fails, the 503
	// waits for the claim to be made again and released, each within PublishTimeout (docs/sources.md, "The
	// replay guard").
	PublishTimeout time.Duration
	// MaxInFlight bounds the deliveries being verified and published at once, and so the publishes waiting on
	// JetStream; more are answered 503 busy. A delivery takes its slot only once its body is in: a slow or withheld
	// body never holds one. Default 256.
	MaxInFlight int
	// MaxBufferedBytes bounds the body bytes held at once by all requests — those being read and those being
	// verified and published — and so the receiver's memory, whatever the number of connections: a request whose
	// next read would pass it is answered 503 busy. A body is counted as it arrives (in steps of at most 16 KiB
	// ahead of what arrived, or of its Content-Length when smaller), not by its declared length. Default 64 MiB; at
	// least MaxBody.
	MaxBufferedBytes int64
	// BodyTimeout bounds reading one body, from the end of its headers (Serve): a body still incomplete then is
	// answered 408 and its connection closed, so that a client trickling bytes cannot hold memory for long.
	// Default 10s: a 4 MiB body at 400 KB/s.
	BodyTimeout time.Duration
	// RetryAfter is the Retry-After of 503 answers, in whole seconds (rounded up). Default 5s.
	RetryAfter time.Duration

	// ReadTimeout bounds reading one request, headers and body (Serve); BodyTimeout bounds the body within it.
	// Default 30s.
	ReadTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown: in-flight requests finish within it, then the rest are
	// cut. Default 30s.
	ShutdownTimeout time.Duration

	// Logger receives the receiver's log lines; nil discards them. Rejections and unavailability are logged at
	// most once per 10 s per kind, with the number left out.
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
// 10097), and MaxHeaderBytes counts the whole block the receiver publishes; 1 KiB is left for what a client
// library or the server may add.
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

var (
	streamName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	subjectPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// Validate checks a Config (after WithDefaults) and joins every problem, each naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("receiver: config: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.JetStream == nil {
		bad("JetStream", "required")
	}
	if c.Policy == nil {
		bad("Policy", "required (NewPolicy)")
	}
	if !streamName.MatchString(c.InputStream) {
		bad("InputStream", "must be 1-255 characters of [A-Za-z0-9_-], got %q", c.InputStream)
	}
	if !subjectPrefix.MatchString(c.InputPrefix) {
		bad("InputPrefix", "must be dot-separated tokens of [A-Za-z0-9_-] without wildcards, got %q", c.InputPrefix)
	}
	if c.MaxBody < 1 || c.MaxBody > 1<<30 {
		bad("MaxBody", "must be between 1 and %d bytes, got %d", 1<<30, c.MaxBody)
	}
	if c.MaxHeaderBytes < 1024 || c.MaxHeaderBytes > MaxHeaderBytesLimit {
		bad("MaxHeaderBytes", "must be between 1024 and %d bytes (JetStream stores header blocks of at most 65535 bytes), got %d",
			MaxHeaderBytesLimit, c.MaxHeaderBytes)
	}
	if c.PublishTimeout < 10*time.Millisecond {
		bad("PublishTimeout", "must be at least 10ms, got %s", c.PublishTimeout)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 65536 {
		bad("MaxInFlight", "must be between 1 and 65536, got %d", c.MaxInFlight)
	}
	if c.MaxBufferedBytes < c.MaxBody || c.MaxBufferedBytes > 1<<40 {
		bad("MaxBufferedBytes", "must be at least MaxBody (%d) and at most %d bytes, got %d", c.MaxBody, int64(1)<<40, c.MaxBufferedBytes)
	}
	if c.BodyTimeout < 100*time.Millisecond {
		bad("BodyTimeout", "must be at least 100ms, got %s", c.BodyTimeout)
	}
	if c.RetryAfter < 0 {
		bad("RetryAfter", "must not be negative, got %s", c.RetryAfter)
	}
	if c.ReadTimeout < time.Second {
		bad("ReadTimeout", "must be at least 1s, got %s", c.ReadTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		bad("ShutdownTimeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	return errors.Join(errs...)
}
