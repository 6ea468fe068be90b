package verify

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Scheme names, as Config.Scheme takes them: the provider names are those of the dedupe presets in package keys.
const (
	SchemeNone             = "none"
	SchemeGitHub           = "github"
	SchemeStripe           = "stripe"
	SchemeStandardWebhooks = "standard_webhooks"
	SchemeSvix             = "svix"
	SchemeShopify          = "shopify"
	SchemeHMAC             = "hmac"
)

// DefaultTolerance is how far a signed timestamp may be from now when Config.Tolerance is zero: 5 minutes, the
// default of Stripe's, Svix's and the Standard Webhooks libraries.
const DefaultTolerance = 5 * time.Minute

// The reasons a delivery does not verify: every error from Verifier.Verify wraps exactly one of them (Reason).
var (
	// ErrMissing: a header the scheme needs is absent or empty.
	ErrMissing = errors.New("verify: header missing")
	// ErrMalformed: a header is present but not in the scheme's format (wrong prefix or encoding, no timestamp,
	// no signature of the version the scheme accepts).
	ErrMalformed = errors.New("verify: header malformed")
	// ErrMismatch: the headers are well formed but no signature in them matches any secret: a forgery, a wrong
	// secret or a body changed on the way.
	ErrMismatch = errors.New("verify: signature mismatch")
	// ErrTimestamp: a signature matched but its signed timestamp is outside the tolerance: a replay or a clock
	// problem.
	ErrTimestamp = errors.New("verify: timestamp outside tolerance")
)

// Verifier checks one delivery: nil when it is verified, else an error saying why (the package guarantees). body
// is the raw body, byte for byte as received: providers sign the bytes.
type Verifier interface {
	Verify(h http.Header, body []byte) error
}

// Config describes how one source's deliveries are verified. The zero value of every optional field means its
// default; a field the scheme does not use must be left zero (New says so rather than ignore it, so that a
// mistyped scheme is not silently weaker than intended).
type Config struct {
	// Scheme is one of Schemes().
	Scheme string
	// Secrets are the signing secrets, as the provider shows them (the package doc says how each scheme reads
	// them): at least one, except for none. A delivery verifies if any matches.
	Secrets []string
	// Header (required), Algorithm, Encoding and Prefix are for the hmac scheme only: the package doc says what
	// each takes.
	Header, Algorithm, Encoding, Prefix string
	// Tolerance is how far a signed timestamp may be from Now, either way (stripe, standard_webhooks and svix
	// only). Zero means DefaultTolerance; it cannot be turned off.
	Tolerance time.Duration
	// Now is the clock the timestamps are checked against; nil means time.Now. Tests set it.
	Now func() time.Time
}

// FieldError is the error New returns for an invalid Config: Field names the field ("scheme", "secrets[1]",
// "tolerance") and Reason says what is wrong, never quoting a secret. A caller that reads the configuration from a
// file can put its own place in front of Field.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "verify: " + e.Field + ": " + e.Reason }

// Schemes returns the scheme names New accepts, sorted.
func Schemes() []string { return slices.Sorted(maps.Keys(schemes)) }

// New validates cfg and returns its Verifier. The Verifier keeps copies of what it needs: changing cfg afterwards
// changes nothing.
func New(cfg Config) (Verifier, error) {
	s, ok := schemes[cfg.Scheme]
	if !ok {
		if cfg.Scheme == "" {
			return nil, &FieldError{"scheme", "required (one of " + strings.Join(Schemes(), ", ") + ")"}
		}
		// The value is never shown: a secret pasted in the wrong place would end up in logs.
		return nil, &FieldError{"scheme", fmt.Sprintf("not a known scheme (%s)", notShown(cfg.Scheme, Schemes()...))}
	}
	// The generic fields belong to hmac; a provider scheme fixes them itself.
	if cfg.Scheme != SchemeHMAC {
		for _, f := range cfg.hmacFields() {
			if f.value != "" {
				return nil, &FieldError{strings.ToLower(f.name), "only for scheme hmac (scheme " + cfg.Scheme + " fixes it)"}
			}
		}
	}
	if cfg.Tolerance < 0 {
		return nil, &FieldError{"tolerance", "negative"}
	}
	if cfg.Tolerance != 0 && !s.timestamped {
		return nil, &FieldError{"tolerance", "scheme " + cfg.Scheme + " signs no timestamp"}
	}
	if cfg.Scheme == SchemeNone {
		if len(cfg.Secrets) > 0 {
			return nil, &FieldError{"secrets", "scheme none takes no secrets"}
		}
		return noneVerifier{}, nil
	}
	if len(cfg.Secrets) == 0 {
		return nil, &FieldError{"secrets", "at least one is required for scheme " + cfg.Scheme}
	}
	for i, sec := range cfg.Secrets {
		if sec == "" {
			return nil, &FieldError{fmt.Sprintf("secrets[%d]", i), "empty"}
		}
		if strings.TrimSpace(sec) != sec {
			return nil, &FieldError{fmt.Sprintf("secrets[%d]", i), "has leading or trailing white space (a newline from a file?)"}
		}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return s.build(cfg, &s, cmp.Or(cfg.Tolerance, DefaultTolerance), now)
}

// Check validates cfg as New does except for its Secrets, which it ignores: the scheme and the options, for a
// configuration read where the secrets are not (a sources file checked before a rollout). A Config Check accepts
// is one New accepts with valid secrets.
func Check(cfg Config) error {
	cfg.Secrets = nil
	if cfg.Scheme != SchemeNone {
		// "secret" in base64, which every scheme takes: going through New keeps one set of rules.
		cfg.Secrets = []string{"c2VjcmV0"}
	}
	_, err := New(cfg)
	return err
}

// scheme is what a scheme name selects: its verifier and what its signature covers.
type scheme struct {
	build       func(cfg Config, s *scheme, tolerance time.Duration, now func() time.Time) (Verifier, error)
	timestamped bool     // the signature covers a timestamp, checked against Config.Tolerance
	bodyOnly    bool     // the signature covers the body alone
	ids         []string // canonical names of the provider's event id, in the order they are read
	reads       []string // canonical names of the signature (then timestamp) headers, in the order they are read
	// The hmac options that github and shopify fix.
	prefix, algorithm, encoding string
}

var schemes = map[string]scheme{
	SchemeNone:   {},
	SchemeGitHub: {build: newMAC, bodyOnly: true, ids: []string{"X-Github-Delivery"}, reads: []string{"X-Hub-Signature-256"}, prefix: "sha256=", algorithm: "sha256", encoding: "hex"},
	// Shopify Events deliveries use the unprefixed names, webhook subscriptions the X- ones; Shopify's shopify_app
	// gem reads the unprefixed signature first.
	SchemeShopify: {build: newMAC, bodyOnly: true, ids: []string{"Shopify-Webhook-Id", "X-Shopify-Webhook-Id"},
		reads: []string{"Shopify-Hmac-Sha256", "X-Shopify-Hmac-Sha256"}, algorithm: "sha256", encoding: "base64"},
	SchemeHMAC:   {build: newMAC, bodyOnly: true},
	SchemeStripe: {build: newStripe, timestamped: true, reads: []string{stripeHeader}},
	SchemeStandardWebhooks: {build: newStandard, timestamped: true, ids: []string{webhookHeaders.id},
		reads: []string{webhookHeaders.timestamp, webhookHeaders.signature}},
	SchemeSvix: {build: newStandard, timestamped: true, ids: []string{svixHeaders.id, webhookHeaders.id},
		reads: []string{svixHeaders.timestamp, svixHeaders.signature, webhookHeaders.timestamp, webhookHeaders.signature}},
}

// Timestamped reports whether a scheme's signature covers a timestamp, checked against Config.Tolerance: stripe,
// standard_webhooks and svix.
func Timestamped(scheme string) bool { return schemes[scheme].timestamped }

// Reason names the reason of an error from Verify, for a metric label: "missing", "malformed", "mismatch",
// "timestamp", "" for nil and "other" for an error that wraps none of the four.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMissing):
		return "missing"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrTimestamp):
		return "timestamp"
	default:
		return "other"
	}
}

// failure is the error Verify returns: a message that names the scheme and the header, wrapping one reason.
type failure struct {
	msg    string
	reason error
}

func (f *failure) Error() string { return f.msg }
func (f *failure) Unwrap() error { return f.reason }

// fail builds a failure. detail must never hold a secret, a MAC or a header value other than a parsed timestamp:
// callers pass fixed text and numbers only.
func fail(scheme, place string, reason error, detail string) error {
	msg := "verify: " + scheme + ": " + place + ": " + strings.TrimPrefix(reason.Error(), "verify: ")
	if detail != "" {
		msg += ": " + detail
	}
	return &failure{msg: msg, reason: reason}
}

// hmacFields are the options of scheme hmac, by name.
func (c Config) hmacFields() [4]struct{ name, value string } {
	return [4]struct{ name, value string }{{"Header", c.Header}, {"Algorithm", c.Algorithm}, {"Encoding", c.Encoding}, {"Prefix", c.Prefix}}
}

// String describes the Config with its secrets counted, never shown, so that logging a Config is safe.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verify.Config{Scheme: %q, Secrets: [%d redacted]", c.Scheme, len(c.Secrets))
	for _, f := range c.hmacFields() {
		if f.value != "" {
			fmt.Fprintf(&b, ", %s: %q", f.name, f.value)
		}
	}
	if c.Tolerance != 0 {
		fmt.Fprintf(&b, ", Tolerance: %s", c.Tolerance)
	}
	if c.Now != nil {
		b.WriteString(", Now: set")
	}
	b.WriteString("}")
	return b.String()
}

// GoString keeps %#v, which would otherwise print every field, from showing the secrets.
func (c Config) GoString() string { return c.String() }

// LogValue keeps slog from printing the secrets.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("scheme", c.Scheme), slog.Int("secrets", len(c.Secrets))}
	for _, f := range c.hmacFields() {
		if f.value != "" {
			attrs = append(attrs, slog.String(strings.ToLower(f.name), f.value))
		}
	}
	if c.Tolerance != 0 {
		attrs = append(attrs, slog.Duration("tolerance", c.Tolerance))
	}
	return slog.GroupValue(attrs...)
}

// describe is embedded by every Verifier: fmt and slog print its text instead of the fields, which hold keys.
type describe struct{ text string }

func (d describe) String() string       { return d.text }
func (d describe) GoString() string     { return d.text }
func (d describe) LogValue() slog.Value { return slog.StringValue(d.text) }

func countSecrets(n int) string {
	if n == 1 {
		return "1 secret"
	}
	return fmt.Sprintf("%d secrets", n)
}

type noneVerifier struct{}

func (noneVerifier) Verify(http.Header, []byte) error { return nil }
func (noneVerifier) String() string                   { return "none (no verification)" }

// notShown describes a configuration value that is not one of want: "want one of a, b; got "md5"" when the value
// reads as a name (plainName), else without showing it, for it could be a secret pasted in the wrong place: "want
// one of a, b; got 28 characters; the value is not shown".
func notShown(got string, want ...string) string {
	if plainName(got) {
		return fmt.Sprintf("want one of %s; got %q", strings.Join(want, ", "), got)
	}
	return fmt.Sprintf("want one of %s; got %d characters; the value is not shown", strings.Join(want, ", "), len(got))
}

// plainName reports whether a configuration value reads as a name someone meant for the field (md5, hmac-sha256,
// githb), not as a secret: at most 16 characters of lower-case letters, digits, '-', '_' and '.'. Secrets are
// longer, or mix cases and symbols.
func plainName(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
