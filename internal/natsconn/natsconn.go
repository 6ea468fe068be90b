// Package natsconn turns the worker's connection settings into a NATS connection: URLs (user/password or token
// inside them work too), user and password, a token, a creds file, an nkey seed, TLS with a CA and a client
// certificate. The first connection is retried, within a bound, while the server cannot be reached (compose and
// Kubernetes start NATS and the worker together) and refused at once when the server rejects the credentials or the
// TLS setup; once connected the client reconnects for ever, with no reconnect buffer (a publish made while
// disconnected fails at once). With PauseFence, nothing the client buffered before a pause of the process is sent
// after it (fence.go). It logs connection events without ever printing a secret. It also reads the nats CLI's saved
// contexts (context.go).
package natsconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/backoff"
	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// Config is how to reach NATS.
type Config struct {
	URL          string // comma-separated URLs
	User         string // user name (with Password); user information inside URL works too
	Password     string
	Token        string // authentication token
	Creds        string // path to a .creds file
	NkeySeedFile string // path to an nkey seed file
	TLSCA        string // path to a PEM CA bundle
	TLSCert      string // path to a PEM client certificate
	TLSKey       string // path to its key
	TLSFirst     bool   // TLS handshake before the server's INFO (servers configured with handshake_first)
	InboxPrefix  string // custom prefix of reply subjects (accounts that only allow their own inbox subjects)
	Name         string // connection name shown by the server
	// Origin says where these settings come from ("url from NATS_URL, credentials from context ..."); it is added
	// to log lines and errors, so that a person can tell which configuration was used. Never a secret.
	Origin string
	Logger *slog.Logger
	// ConnectTimeout bounds each attempt of the first connection (default 5s).
	ConnectTimeout time.Duration
	// PauseFence, when positive, fences the connection after a pause of the process longer than it (fence.go).
	// Zero: no fence.
	PauseFence time.Duration
	// RetryFor bounds how long the first connection is retried while the server cannot be reached
	// (jserr.Unreachable), with a backoff from 250ms to 5s between attempts. Zero: one attempt.
	RetryFor time.Duration
}

// DefaultPauseFence is the worker's PauseFence: a gap of 2s in a 100ms tick is no scheduling hiccup, even on a
// loaded machine; a false alarm costs a reconnect and the redelivery of what was in flight.
const DefaultPauseFence = 2 * time.Second

// ConnectContext opens the connection, retrying the first one for at most cfg.RetryFor (logging each attempt at
// warn level) or until ctx ends, as the package doc says.
func ConnectContext(ctx context.Context, cfg Config) (*nats.Conn, error) {
	if cfg.URL == "" {
		return nil, errors.New("natsconn: url: must not be empty")
	}
	if err := CheckURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("natsconn: url: %w%s", err, cfg.origin())
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	opts, err := cfg.options(log)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(cfg.RetryFor)
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 1; ; attempt++ {
		timeout := cfg.ConnectTimeout
		if left := time.Until(deadline); attempt > 1 && left < timeout {
			timeout = max(left, 100*time.Millisecond)
		}
		nc, err := nats.Connect(cfg.URL, append(opts, nats.Timeout(timeout))...)
		if err == nil {
			return nc, nil
		}
		left := time.Until(deadline)
		if !jserr.Unreachable(err) || left <= 0 {
			if attempt > 1 {
				err = fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempt, time.Since(start).Round(time.Millisecond))
			}
			return nil, cfg.connectErr(err)
		}
		wait := min(bo.Next(), left)
		log.Warn("NATS not reachable yet; retrying", "url", Redact(cfg.URL), "from", cfg.Origin, "attempt", attempt,
			"in", wait, "gives_up_in", left.Round(time.Millisecond), "err", err)
		if backoff.Wait(ctx, wait) != nil {
			return nil, cfg.connectErr(fmt.Errorf("%w (interrupted after %d attempts in %s)", err, attempt, time.Since(start).Round(time.Millisecond)))
		}
	}
}

// connectErr is the error of a failed first connection: the URL without user information, the cause, and where
// the settings came from.
func (cfg Config) connectErr(err error) error {
	return fmt.Errorf("natsconn: connect to %s: %w%s", Redact(cfg.URL), err, cfg.origin())
}

// origin is " (<Origin>)" for an error's end, or "".
func (cfg Config) origin() string {
	if cfg.Origin == "" {
		return ""
	}
	return " (" + cfg.Origin + ")"
}

// options are the connection options of cfg, except the per-attempt timeout. Files are checked here, so that an
// unreadable creds file fails before any attempt rather than after the server answers.
func (cfg Config) options(log *slog.Logger) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(10 * time.Second),
		// No reconnect buffer: a publish made while disconnected fails at once (the envelope is handed back)
		// instead of going out whenever the connection comes back, possibly after the output stream's duplicate
		// window, when another replica has long published the same event.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", "server", Redact(nc.ConnectedUrlRedacted()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("NATS asynchronous error", "subject", subj, "err", err)
		}),
	}
	if cfg.PauseFence > 0 {
		// A custom dialer gets no timeout from nats.go: each dial is bounded by ConnectTimeout here.
		d := &net.Dialer{Timeout: cfg.ConnectTimeout}
		opts = append(opts, nats.SetCustomDialer(newFence(cfg.PauseFence, log, d.Dial)))
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.Creds != "" {
		// nats.go reads the creds file only once the server answers: read it now, so that an unreadable or empty
		// file is reported at once even while the server is still unreachable.
		data, err := os.ReadFile(cfg.Creds)
		if err != nil {
			return nil, fmt.Errorf("natsconn: creds file: %w", err)
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			return nil, fmt.Errorf("natsconn: creds file %s: is empty", cfg.Creds)
		}
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("natsconn: nkey seed file %s: %w", cfg.NkeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	// RootCAs and ClientCert read their files when nats.Connect applies them: a bad TLS setup fails the first
	// attempt with an error jserr.Unreachable does not retry.
	return opts, nil
}

// Redact removes user information (user, password, token) from each URL of a comma-separated list.
func Redact(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if at := strings.LastIndex(p, "@"); at >= 0 {
			start := 0
			if s := strings.Index(p, "://"); s >= 0 && s < at {
				start = s + 3
			}
			p = p[:start] + "[redacted]@" + p[at+1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}
