// Package natsconn turns the worker's connection settings into a NATS connection: URLs (user/password or token
// inside them work too), a creds file, an nkey seed, TLS with a CA and a client certificate. It reconnects for ever
// once connected, and logs connection events without ever printing a secret.
package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Config is how to reach NATS.
type Config struct {
	URL          string // comma-separated URLs
	Creds        string // path to a .creds file
	NkeySeedFile string // path to an nkey seed file
	TLSCA        string // path to a PEM CA bundle
	TLSCert      string // path to a PEM client certificate
	TLSKey       string // path to its key
	Name         string // connection name shown by the server
	Logger       *slog.Logger
	// ConnectTimeout bounds the first connection (default 5s).
	ConnectTimeout time.Duration
}

// Connect opens the connection. The first attempt fails fast with a readable error; after that the client
// reconnects without limit, so that a NATS restart or a leader change only pauses the worker.
func Connect(cfg Config) (*nats.Conn, error) {
	if cfg.URL == "" {
		return nil, errors.New("natsconn: url: must not be empty")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
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
	if cfg.Creds != "" {
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
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsconn: connect to %s: %w", Redact(cfg.URL), err)
	}
	return nc, nil
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
