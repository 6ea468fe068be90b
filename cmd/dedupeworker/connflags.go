package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

// connFlags are the NATS connection flags of every command that talks to NATS.
type connFlags struct {
	server string
}

// addConnFlags registers the connection flags on fs.
func addConnFlags(fs *flag.FlagSet) *connFlags {
	f := &connFlags{}
	fs.StringVar(&f.server, "s", "", "NATS server URL(s)")
	fs.StringVar(&f.server, "server", "", "NATS server URL(s)")
	return f
}

// connect opens the connection of a command other than run: the flags, then the DEDUPE_NATS_* settings, then
// the embedded server's listen address.
func (f *connFlags) connect(_ context.Context, cfg config.Config, name string, log *slog.Logger) (*nats.Conn, error) {
	url := f.server
	if url == "" {
		url = cfg.NatsURL
	}
	if url == "" {
		url = "nats://" + cfg.EmbeddedListen
	}
	return natsconn.Connect(natsconn.Config{
		URL: url, Creds: cfg.NatsCreds, NkeySeedFile: cfg.NatsNkeySeedFile,
		TLSCA: cfg.NatsTLSCa, TLSCert: cfg.NatsTLSCert, TLSKey: cfg.NatsTLSKey,
		Name: name, ConnectTimeout: 5 * time.Second, Logger: log,
	})
}
