// Package config reads the worker's settings from DEDUPE_* environment variables (envconfig) and validates them.
// Every error names the variable it is about, so that a bad setting stops the worker at start with a message a
// person can act on.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/ident"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

// Prefix is the environment prefix of every setting.
const Prefix = "DEDUPE"

// Config is every setting of the worker. Field names map to variables through envconfig's split_words
// (NatsURL → DEDUPE_NATS_URL); no setting falls back to an unprefixed variable. The role tag says which of the
// long-running commands reads a setting (RoleRun, RoleIngest), so that each logs its own at start (Attrs).
type Config struct {
	NatsURL          string `split_words:"true" desc:"NATS server URL(s), comma separated; empty: NATS_URL or the nats CLI's context, else run starts an embedded JetStream server" role:"run ingest"`
	NatsCreds        string `split_words:"true" desc:"path to a NATS credentials (.creds) file" role:"run ingest"`
	NatsNkeySeedFile string `split_words:"true" desc:"path to an nkey seed file" role:"run ingest"`
	NatsTLSCa        string `split_words:"true" desc:"path to a PEM CA bundle to verify the server" role:"run ingest"`
	NatsTLSCert      string `split_words:"true" desc:"path to a PEM client certificate (with DEDUPE_NATS_TLS_KEY)" role:"run ingest"`
	NatsTLSKey       string `split_words:"true" desc:"path to the PEM key of the client certificate" role:"run ingest"`
	// NatsConnectTimeout is not a connection setting in the sense of NatsConfigured: it applies whichever
	// configuration names the server.
	NatsConnectTimeout time.Duration `split_words:"true" desc:"how long the first connection to NATS is retried while the server is unreachable; empty: 2m for run and ingest, one attempt for the other commands" role:"run ingest"`

	EmbeddedListen   string `split_words:"true" default:"127.0.0.1:4222" desc:"where the embedded server listens (when no NATS server is configured anywhere; the other commands then connect here)" role:"run ingest"`
	EmbeddedStoreDir string `split_words:"true" default:"./data/nats" desc:"JetStream store of the embedded server" role:"run"`

	SourcesFile string `split_words:"true" desc:"path to the sources file (YAML or JSON)" role:"run ingest"`
	Sources     string `desc:"the sources document inline (YAML or JSON); exclusive with DEDUPE_SOURCES_FILE" role:"run ingest"`

	InputStream      string `split_words:"true" default:"INGEST" desc:"stream that captures raw envelopes" role:"run ingest"`
	InputPrefix      string `split_words:"true" default:"ingest" desc:"subject prefix of raw envelopes: <prefix>.<tenant>.<source>" role:"run ingest"`
	OutputStream     string `split_words:"true" default:"DEDUPED" desc:"stream that captures unique events" role:"run"`
	OutputPrefix     string `split_words:"true" default:"deduped" desc:"subject prefix of unique events" role:"run"`
	DLQStream        string `split_words:"true" default:"DEDUPE_DLQ" desc:"stream that captures dead letters" role:"run"`
	DLQPrefix        string `split_words:"true" default:"dedupe.dlq" desc:"subject prefix of dead letters: <prefix>.<reason>" role:"run"`
	DuplicatesPrefix string `split_words:"true" desc:"when set, duplicates are copied to <prefix>.<tenant>.<source> for audit" role:"run"`
	Bucket           string `default:"dedupe-window" desc:"KV bucket that holds the claim window" role:"run"`
	WindowShards     int    `split_words:"true" default:"1" desc:"buckets the window is spread over (1-64); 1 keeps the single bucket DEDUPE_BUCKET; fixed for a deployment" role:"run"`
	WindowPlacement  string `split_words:"true" desc:"placement of the window's buckets, one entry per shard in turn, separated by ';': comma-separated tags, and cluster=NAME" role:"run"`
	MaxAckPending    int    `split_words:"true" desc:"the consumer's MaxAckPending, for the whole fleet; empty: max(1000, 10 x DEDUPE_MAX_IN_FLIGHT) when the worker creates it, and an existing consumer is left as it is" role:"run"`
	Consumer         string `default:"dedupeworker" desc:"durable consumer name shared by all replicas" role:"run"`

	Provision             bool          `default:"true" desc:"create missing streams, bucket and consumer (never changes existing ones)" role:"run"`
	Replicas              int           `default:"1" desc:"replicas of what the worker provisions (1, 3 or 5)" role:"run"`
	DefaultTTL            time.Duration `split_words:"true" default:"72h" desc:"claim TTL of sources that set none" role:"run"`
	MaxJSONBytes          int           `split_words:"true" default:"1048576" desc:"largest body read for json and payload keys" role:"run ingest"`
	MaxInFlight           int           `split_words:"true" default:"1024" desc:"envelopes processed at once per replica" role:"run"`
	AckWait               time.Duration `split_words:"true" default:"30s" desc:"consumer ack wait" role:"run"`
	ConsumerStart         string        `split_words:"true" desc:"where a consumer created on a non-empty input stream that keeps processed envelopes starts: all, new, seq:<n> or time:<RFC 3339>" role:"run"`
	OutputMaxAge          time.Duration `split_words:"true" default:"168h" desc:"age limit of the output stream when the worker creates it" role:"run"`
	OutputDuplicateWindow time.Duration `split_words:"true" desc:"duplicate window of the output and dead-letter streams when the worker creates them (default max(2m, 4 x DEDUPE_ACK_WAIT))" role:"run"`
	DLQMaxAge             time.Duration `split_words:"true" default:"720h" desc:"age limit of the dead-letter stream when the worker creates it" role:"run"`
	MaxHold               time.Duration `split_words:"true" desc:"longest a delivery is held before it is published, else handed back; empty: half the output's duplicate window" role:"run"`
	ForwardWhenWindowDown bool          `split_words:"true" default:"false" desc:"forward unkeyed instead of retrying when the window is unreachable" role:"run"`
	HTTPAddr              string        `split_words:"true" default:":9464" desc:"address of /metrics, /healthz and /readyz; empty disables" role:"run"`
	Pprof                 bool          `default:"false" desc:"serve Go's /debug/pprof/ profiles on DEDUPE_HTTP_ADDR" role:"run"`
	LogLevel              string        `split_words:"true" default:"info" desc:"debug, info, warn or error" role:"run ingest"`
	LogFormat             string        `split_words:"true" default:"auto" desc:"auto (tint on a terminal, JSON otherwise), text or json" role:"run ingest"`
	ShutdownTimeout       time.Duration `split_words:"true" default:"30s" desc:"how long shutdown may take" role:"run ingest"`

	// dedupeworker ingest, the webhook receiver. Its signing secrets are not settings: DEDUPE_INGEST_SECRET_<SOURCE>
	// variables and the files of DEDUPE_INGEST_SECRETS_DIR are read by package receiver, never logged.
	IngestAddr           string        `split_words:"true" default:":8080" desc:"address of dedupeworker ingest: POST /hooks/<tenant>/<source>, /metrics, /healthz, /readyz" role:"ingest"`
	IngestMaxBody        int           `split_words:"true" default:"4194304" desc:"largest webhook body ingest accepts, in bytes (413 above); the NATS server's max_payload bounds it too" role:"ingest"`
	IngestMaxHeaderBytes int           `split_words:"true" default:"32768" desc:"largest header block ingest publishes with a delivery, in bytes (431 above); at most 64512 (JetStream stores 65535, the receiver's own headers included)" role:"ingest"`
	IngestSecretsDir     string        `split_words:"true" desc:"directory of ingest's signing secrets: files named <source> (every tenant) or <tenant>.<source>, one secret per line" role:"ingest"`
	IngestPublishTimeout time.Duration `split_words:"true" default:"3s" desc:"how long ingest waits for JetStream to store a delivery before answering 503" role:"ingest"`
	IngestMaxInFlight    int           `split_words:"true" default:"256" desc:"deliveries ingest verifies and publishes at once, each taken once its body is in (slow bodies wait apart: DEDUPE_INGEST_MAX_BUFFERED_BYTES); more are answered 503 busy" role:"ingest"`
	// Its default follows DEDUPE_INGEST_MAX_BODY, which it may not be below: IngestMaxBuffered is the value in force.
	IngestMaxBufferedBytes int64         `split_words:"true" desc:"body bytes ingest holds at once over all requests, counted as they arrive (503 busy past it); at least DEDUPE_INGEST_MAX_BODY; empty: max(64 MiB, DEDUPE_INGEST_MAX_BODY)" role:"ingest"`
	IngestBodyTimeout      time.Duration `split_words:"true" default:"10s" desc:"how long a webhook body may take to arrive after its headers (408 past it)" role:"ingest"`
}

// Limits and defaults of ingest settings that package receiver fixes too. config does not import receiver, so
// they are written twice, and cmd/dedupeworker's tests check that both agree.
const (
	// IngestMaxHeaderBytesLimit is receiver.MaxHeaderBytesLimit: JetStream stores header blocks of at most 65535
	// bytes, the receiver's own headers included, and 1 KiB is left for what a client library or the server adds.
	IngestMaxHeaderBytesLimit = 65535 - 1023
	// DefaultIngestMaxBuffered is receiver.DefaultMaxBuffered, the floor of DEDUPE_INGEST_MAX_BUFFERED_BYTES's
	// default. DEDUPE_INGEST_BODY_TIMEOUT's default (10s) is receiver.DefaultBodyTimeout.
	DefaultIngestMaxBuffered = 64 << 20
)

// IngestMaxBuffered is DEDUPE_INGEST_MAX_BUFFERED_BYTES, or when it is empty (or 0) max(64 MiB,
// DEDUPE_INGEST_MAX_BODY), so that a larger body limit needs no second setting.
func (c Config) IngestMaxBuffered() int64 {
	if c.IngestMaxBufferedBytes > 0 {
		return c.IngestMaxBufferedBytes
	}
	return max(DefaultIngestMaxBuffered, int64(c.IngestMaxBody))
}

// Load reads the environment and validates the result.
func Load() (Config, error) {
	var c Config
	if err := envconfig.Process(Prefix, &c); err != nil {
		return Config{}, fmt.Errorf("config: %w", rewordParseError(err))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// rewordParseError turns envconfig's field-oriented message into one that names the variable.
func rewordParseError(err error) error {
	var pe *envconfig.ParseError
	if errors.As(err, &pe) {
		typ := pe.TypeName
		if typ == "time.Duration" {
			typ = "duration" // what the value should be (30s, 1m30s), not the Go type
		}
		return fmt.Errorf("%s: cannot parse %q as %s", pe.KeyName, pe.Value, typ)
	}
	return err
}

var (
	bucketName    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,240}$`)
	consumerStart = regexp.MustCompile(`^(|all|new|seq:[1-9][0-9]*|time:\d{4}-\d\d-\d\dT\S+)$`)
)

// Validate checks every setting and joins all problems, each naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		for i, a := range args {
			if d, ok := a.(time.Duration); ok {
				args[i] = FormatDuration(d)
			}
		}
		errs = append(errs, fmt.Errorf("config: %s_%s: %s", Prefix, name, fmt.Sprintf(format, args...)))
	}
	if (c.NatsTLSCert == "") != (c.NatsTLSKey == "") {
		bad("NATS_TLS_CERT", "must be set together with DEDUPE_NATS_TLS_KEY")
	}
	if c.NatsConnectTimeout < 0 {
		bad("NATS_CONNECT_TIMEOUT", "must not be negative, got %s", c.NatsConnectTimeout)
	}
	if c.NatsCreds != "" && c.NatsNkeySeedFile != "" {
		bad("NATS_CREDS", "set either DEDUPE_NATS_CREDS or DEDUPE_NATS_NKEY_SEED_FILE, not both")
	}
	for _, f := range [...]struct{ name, path string }{{"NATS_CREDS", c.NatsCreds}, {"NATS_NKEY_SEED_FILE", c.NatsNkeySeedFile},
		{"NATS_TLS_CA", c.NatsTLSCa}, {"NATS_TLS_CERT", c.NatsTLSCert}, {"NATS_TLS_KEY", c.NatsTLSKey}, {"SOURCES_FILE", c.SourcesFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.name, "cannot read %q: %v", f.path, errors.Unwrap(err))
		}
	}
	if c.NatsURL == "" {
		if _, _, err := net.SplitHostPort(c.EmbeddedListen); err != nil {
			bad("EMBEDDED_LISTEN", "must be host:port, got %q", c.EmbeddedListen)
		} else if err := natsconn.CheckURL("nats://" + c.EmbeddedListen); err != nil {
			// The other commands (and ingest) connect to it.
			bad("EMBEDDED_LISTEN", "must be host:port, got %q: %v", c.EmbeddedListen, err)
		}
		if c.EmbeddedStoreDir == "" {
			bad("EMBEDDED_STORE_DIR", "must not be empty")
		}
	}
	if c.SourcesFile != "" && c.Sources != "" {
		bad("SOURCES", "set either DEDUPE_SOURCES or DEDUPE_SOURCES_FILE, not both")
	}
	for _, s := range []struct{ name, v string }{{"INPUT_STREAM", c.InputStream}, {"OUTPUT_STREAM", c.OutputStream}, {"DLQ_STREAM", c.DLQStream}, {"CONSUMER", c.Consumer}} {
		if !ident.ValidName(s.v) {
			bad(s.name, "must be 1-255 characters of [A-Za-z0-9_-], got %q", s.v)
		}
	}
	if c.InputStream == c.OutputStream || c.InputStream == c.DLQStream || (c.OutputStream == c.DLQStream && c.OutputStream != "") {
		bad("OUTPUT_STREAM", "input, output and dead-letter streams must differ (got %q, %q, %q)", c.InputStream, c.OutputStream, c.DLQStream)
	}
	if !bucketName.MatchString(c.Bucket) {
		bad("BUCKET", "must be 1-240 characters of [A-Za-z0-9_-], got %q", c.Bucket)
	}
	prefixes := []struct{ name, v string }{{"INPUT_PREFIX", c.InputPrefix}, {"OUTPUT_PREFIX", c.OutputPrefix}, {"DLQ_PREFIX", c.DLQPrefix}, {"DUPLICATES_PREFIX", c.DuplicatesPrefix}}
	for _, p := range prefixes {
		if (p.v != "" || p.name != "DUPLICATES_PREFIX") && !ident.ValidPrefix(p.v) {
			bad(p.name, "must be dot-separated tokens of [A-Za-z0-9_-] without wildcards, got %q", p.v)
		}
	}
	for _, p := range prefixes[1:] {
		if p.v != "" && ident.Overlaps(p.v, c.InputPrefix) {
			bad(p.name, "%q overlaps DEDUPE_INPUT_PREFIX %q: the worker would consume its own output", p.v, c.InputPrefix)
		}
	}
	if c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5 {
		bad("REPLICAS", "must be 1, 3 or 5, got %d", c.Replicas)
	}
	if c.DefaultTTL < time.Second || c.DefaultTTL%time.Second != 0 {
		bad("DEFAULT_TTL", "must be whole seconds and at least 1s, got %s", c.DefaultTTL)
	}
	if c.MaxJSONBytes < 1 {
		bad("MAX_JSON_BYTES", "must be positive, got %d", c.MaxJSONBytes)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 65536 {
		bad("MAX_IN_FLIGHT", "must be between 1 and 65536, got %d", c.MaxInFlight)
	}
	if c.AckWait < time.Second {
		bad("ACK_WAIT", "must be at least 1s, got %s", c.AckWait)
	}
	dup := max(2*time.Minute, 4*c.AckWait)
	if c.OutputDuplicateWindow != 0 {
		dup = c.OutputDuplicateWindow
		if dup < c.AckWait {
			bad("OUTPUT_DUPLICATE_WINDOW", "must be at least DEDUPE_ACK_WAIT (%s), got %s", c.AckWait, dup)
		}
	}
	if c.OutputMaxAge < dup {
		bad("OUTPUT_MAX_AGE", "must be at least the output's duplicate window (DEDUPE_OUTPUT_DUPLICATE_WINDOW, default max(2m, 4 x DEDUPE_ACK_WAIT)) = %s, got %s", dup, c.OutputMaxAge)
	}
	if c.DLQMaxAge < time.Minute {
		bad("DLQ_MAX_AGE", "must be at least 1m, got %s", c.DLQMaxAge)
	}
	if c.WindowShards < 1 || c.WindowShards > 64 {
		bad("WINDOW_SHARDS", "must be between 1 and 64, got %d", c.WindowShards)
	}
	if _, err := ParsePlacement(c.WindowPlacement); err != nil {
		bad("WINDOW_PLACEMENT", "%v", err)
	}
	if c.MaxAckPending < 0 {
		bad("MAX_ACK_PENDING", "must not be negative, got %d", c.MaxAckPending)
	}
	if c.MaxHold < 0 {
		bad("MAX_HOLD", "must not be negative, got %s", c.MaxHold)
	}
	if !consumerStart.MatchString(c.ConsumerStart) {
		bad("CONSUMER_START", "must be all, new, seq:<n> or time:<RFC 3339>, got %q", c.ConsumerStart)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); c.HTTPAddr != "" && err != nil {
		bad("HTTP_ADDR", "must be host:port or :port, got %q", c.HTTPAddr)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "warning", "error"}, strings.ToLower(c.LogLevel)) {
		bad("LOG_LEVEL", "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	if !slices.Contains([]string{"auto", "text", "json"}, c.LogFormat) {
		bad("LOG_FORMAT", "must be auto, text or json, got %q", c.LogFormat)
	}
	if c.ShutdownTimeout < time.Second {
		bad("SHUTDOWN_TIMEOUT", "must be at least 1s, got %s", c.ShutdownTimeout)
	}
	if _, _, err := net.SplitHostPort(c.IngestAddr); err != nil {
		bad("INGEST_ADDR", "must be host:port or :port, got %q", c.IngestAddr)
	}
	if c.IngestMaxBody < 1 || c.IngestMaxBody > 1<<30 {
		bad("INGEST_MAX_BODY", "must be between 1 and %d bytes, got %d", 1<<30, c.IngestMaxBody)
	}
	if c.IngestMaxHeaderBytes < 1024 || c.IngestMaxHeaderBytes > IngestMaxHeaderBytesLimit {
		bad("INGEST_MAX_HEADER_BYTES", "must be between 1024 and %d bytes (JetStream stores header blocks of at most 65535 bytes, "+
			"the receiver's own headers included), got %d", IngestMaxHeaderBytesLimit, c.IngestMaxHeaderBytes)
	}
	if c.IngestPublishTimeout < 100*time.Millisecond || c.IngestPublishTimeout > time.Minute {
		bad("INGEST_PUBLISH_TIMEOUT", "must be between 100ms and 1m, got %s", c.IngestPublishTimeout)
	}
	if c.IngestMaxInFlight < 1 || c.IngestMaxInFlight > 65536 {
		bad("INGEST_MAX_IN_FLIGHT", "must be between 1 and 65536, got %d", c.IngestMaxInFlight)
	}
	if n := c.IngestMaxBufferedBytes; n != 0 && (n < int64(c.IngestMaxBody) || n > 1<<40) {
		bad("INGEST_MAX_BUFFERED_BYTES", "must be between DEDUPE_INGEST_MAX_BODY (%d) and %d bytes, got %d", c.IngestMaxBody, int64(1)<<40, n)
	}
	if c.IngestBodyTimeout < 100*time.Millisecond || c.IngestBodyTimeout > 10*time.Minute {
		bad("INGEST_BODY_TIMEOUT", "must be between 100ms and 10m, got %s", c.IngestBodyTimeout)
	}
	return errors.Join(errs...)
}

// How long the first connection to NATS is retried while the server is unreachable, when
// DEDUPE_NATS_CONNECT_TIMEOUT is empty: the worker waits for a NATS started beside it (compose, Kubernetes); the
// other commands are run by a person, who should hear at once that the server is not there.
const (
	DefaultRunConnectTimeout     = 2 * time.Minute
	DefaultCommandConnectTimeout = 0 // one attempt: a refused connection or an unknown host fails at once
)

// FormatDuration writes a duration as the settings and the docs do, without Go's zero units: 72h, 2m, 1m30s,
// 250ms (Go writes 72h0m0s and 2m0s). Every duration the commands print goes through it.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ConnectRetry is DEDUPE_NATS_CONNECT_TIMEOUT, or def when it is empty (or 0).
func (c Config) ConnectRetry(def time.Duration) time.Duration {
	if c.NatsConnectTimeout > 0 {
		return c.NatsConnectTimeout
	}
	return def
}

// NatsConfigured reports whether a DEDUPE_NATS_* connection setting is set (URL, creds, nkey seed, TLS files). The
// commands then take the connection from the DEDUPE_NATS_* settings alone and never mix in NATS_* variables or a
// nats CLI context.
func (c Config) NatsConfigured() bool {
	return c.NatsURL != "" || c.NatsCreds != "" || c.NatsNkeySeedFile != "" || c.NatsTLSCa != "" ||
		c.NatsTLSCert != "" || c.NatsTLSKey != ""
}

// The long-running commands, as the role tags of Config name them.
const (
	RoleRun    = "run"    // the worker
	RoleIngest = "ingest" // the webhook receiver
)

// LogValue logs every setting by variable name, leaving out empty ones and redacting secrets.
func (c Config) LogValue() slog.Value { return slog.GroupValue(c.Attrs("")...) }

// Attrs are the settings role reads (every one for ""), in the order of Variables, as LogValue logs them: by
// variable name, empty strings left out, secrets redacted, durations as FormatDuration writes them.
func (c Config) Attrs(role string) []slog.Attr {
	c.NatsURL = natsconn.Redact(c.NatsURL) // user information in a URL may be a password or a token
	v := reflect.ValueOf(c)
	names := Variables()
	attrs := make([]slog.Attr, 0, len(names))
	for i := 0; i < v.NumField() && i < len(names); i++ {
		if role != "" && !reads(i, role) {
			continue
		}
		f := v.Field(i)
		if f.IsZero() && f.Kind() == reflect.String {
			continue
		}
		val := f.Interface()
		if d, ok := val.(time.Duration); ok {
			val = FormatDuration(d)
		}
		attrs = append(attrs, slog.Any(names[i], val))
	}
	return attrs
}

// RoleVariables lists, in the order of Variables, the variables role reads.
func RoleVariables(role string) []string {
	var out []string
	for i, name := range Variables() {
		if reads(i, role) {
			out = append(out, name)
		}
	}
	return out
}

// reads reports whether the role tag of Config's field i names role.
func reads(i int, role string) bool {
	return slices.Contains(strings.Fields(reflect.TypeFor[Config]().Field(i).Tag.Get("role")), role)
}

// Usage writes every variable with its default and description.
func Usage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, l := range usageLines() {
		fmt.Fprintln(tw, "  "+l)
	}
	return tw.Flush()
}

// usageLines are "VARIABLE<tab>DEFAULT<tab>DESCRIPTION", one per setting in the order of Config.
func usageLines() []string {
	var sb strings.Builder
	_ = envconfig.Usagef(Prefix, &Config{}, &sb, "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}")
	return strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
}

// Variables lists every variable name the worker reads.
func Variables() []string {
	var names []string
	for _, l := range usageLines() {
		name, _, _ := strings.Cut(l, "\t")
		names = append(names, name)
	}
	return names
}

// ParsePlacement reads DEDUPE_WINDOW_PLACEMENT: entries separated by ';', one per shard in turn (shard i takes entry
// i modulo their number); each entry is comma-separated tags, of which one may be cluster=NAME. Empty: no placement.
func ParsePlacement(s string) ([]jetstream.Placement, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []jetstream.Placement
	for i, entry := range strings.Split(s, ";") {
		var p jetstream.Placement
		for _, item := range strings.Split(entry, ",") {
			item = strings.TrimSpace(item)
			switch {
			case item == "":
			case strings.HasPrefix(item, "cluster="):
				if p.Cluster != "" {
					return nil, fmt.Errorf("entry %d (%q) names two clusters", i+1, entry)
				}
				p.Cluster = strings.TrimPrefix(item, "cluster=")
			default:
				p.Tags = append(p.Tags, item)
			}
		}
		if p.Cluster == "" && len(p.Tags) == 0 {
			return nil, fmt.Errorf("entry %d (%q) has no tag and no cluster=NAME", i+1, entry)
		}
		out = append(out, p)
	}
	return out, nil
}

// mostTouched are, per role, the ten settings people change first, in the order `run -h` and `ingest -h` show them
// (the rest follow, in the order of Variables).
var mostTouched = map[string][]string{
	RoleRun: {"DEDUPE_NATS_URL", "DEDUPE_NATS_CREDS", "DEDUPE_SOURCES_FILE", "DEDUPE_DEFAULT_TTL", "DEDUPE_REPLICAS",
		"DEDUPE_WINDOW_SHARDS", "DEDUPE_MAX_IN_FLIGHT", "DEDUPE_HTTP_ADDR", "DEDUPE_LOG_LEVEL", "DEDUPE_LOG_FORMAT"},
	RoleIngest: {"DEDUPE_NATS_URL", "DEDUPE_NATS_CREDS", "DEDUPE_SOURCES_FILE", "DEDUPE_INGEST_ADDR",
		"DEDUPE_INGEST_SECRETS_DIR", "DEDUPE_INGEST_MAX_BODY", "DEDUPE_INGEST_PUBLISH_TIMEOUT", "DEDUPE_INGEST_MAX_IN_FLIGHT",
		"DEDUPE_LOG_LEVEL", "DEDUPE_LOG_FORMAT"},
}

// RoleUsage writes the settings role reads, as Usage does, in two groups: the ten most often changed, then the
// others.
func RoleUsage(w io.Writer, role string) error {
	lines := map[string]string{}
	for _, l := range usageLines() {
		name, _, _ := strings.Cut(l, "\t")
		lines[name] = l
	}
	reads := RoleVariables(role)
	top := mostTouched[role]
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  The ten most often changed:")
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, name := range top {
		if slices.Contains(reads, name) {
			fmt.Fprintln(tw, "  "+lines[name])
		}
	}
	fmt.Fprintln(tw, "\n  The others:")
	for _, name := range reads {
		if !slices.Contains(top, name) {
			fmt.Fprintln(tw, "  "+lines[name])
		}
	}
	return tw.Flush()
}
