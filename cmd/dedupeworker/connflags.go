package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/config"
	embeddedsrv "github.com/dedupeworker/dedupeworker/internal/embedded"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

// connFlags are the NATS connection flags of every command that talks to NATS. With the DEDUPE_NATS_* settings,
// the nats CLI's NATS_* variables and its contexts they make one connection, first match winning in the order of
// docs/reference.md ("Connecting").
type connFlags struct {
	cmd string // the command, as errors name it ("run", "window get", "dlq ls")

	server, creds, nkey, tlsCA, tlsCert, tlsKey, context string
	embedded                                             bool // run --embedded: the embedded server, whatever NATS_URL or a context say

	// cliURL is set by resolve when the server URL came from the nats CLI's configuration (NATS_URL or a context
	// not named by --context): where it came from, as the worker warns before provisioning there.
	cliURL string
}

func addConnFlags(fs *flag.FlagSet) *connFlags {
	f := &connFlags{cmd: fs.Name()}
	fs.StringVar(&f.server, "s", "", "NATS server `URL`(s), comma separated (over DEDUPE_NATS_URL, NATS_URL and contexts)")
	fs.StringVar(&f.server, "server", "", "same as -s")
	fs.StringVar(&f.creds, "creds", "", "NATS credentials (.creds) `file`")
	fs.StringVar(&f.nkey, "nkey", "", "nkey seed `file`")
	fs.StringVar(&f.tlsCA, "tlsca", "", "PEM CA bundle `file` to verify the server")
	fs.StringVar(&f.tlsCert, "tlscert", "", "PEM client certificate `file` (with --tlskey)")
	fs.StringVar(&f.tlsKey, "tlskey", "", "PEM key `file` of the client certificate")
	fs.StringVar(&f.context, "context", "", "the nats CLI context `NAME` (or path to its .json file) to connect with")
	return f
}

// connect opens the connection of a command other than run and ingest; with no server configured anywhere, it
// connects to the embedded server's listen address. Errors are *exitError already: 2 for a bad flag, setting or
// context, 1 for a failed connection.
func (f *connFlags) connect(ctx context.Context, cfg config.Config, name string, log *slog.Logger) (*nats.Conn, error) {
	nc, embedded, err := f.resolve(cfg)
	if err != nil {
		return nil, err
	}
	if embedded {
		nc.URL = "nats://" + cfg.EmbeddedListen
		nc.Origin = joinOrigin("url from DEDUPE_EMBEDDED_LISTEN (no NATS server configured)", nc.Origin)
	}
	nc.Name, nc.Logger = name, log
	// One attempt unless DEDUPE_NATS_CONNECT_TIMEOUT asks for more: a person at a terminal hears at once that
	// the server is not there, as with the nats CLI.
	nc.ConnectTimeout, nc.RetryFor = 5*time.Second, cfg.ConnectRetry(config.DefaultCommandConnectTimeout)
	conn, err := natsconn.ConnectContext(ctx, nc)
	if err != nil {
		switch {
		case embedded && errors.Is(err, nats.ErrNoServers) && embeddedsrv.StoreHeld(cfg.EmbeddedStoreDir):
			// A worker holds the store but its server does not listen: it recovers every stream before it
			// listens (seconds per million window keys), and stops listening before it lets the store go.
			err = fmt.Errorf("%w; a worker holds the store directory %s (DEDUPE_EMBEDDED_STORE_DIR) and its embedded "+
				"server does not listen: it is still starting or recovering its streams (try again once the worker has "+
				"logged 'embedded NATS server with JetStream started'), or it is stopping", err, cfg.EmbeddedStoreDir)
		case embedded && errors.Is(err, nats.ErrNoServers):
			// Refused at the address of a server that exists only while a worker runs with it: the likeliest
			// cause is that none runs, which "no servers available" alone does not say.
			err = fmt.Errorf("%w; no server listens there: the embedded server runs only inside the worker (make "+
				"run, dedupeworker run): start the worker, or name your NATS server (-s, --context, DEDUPE_NATS_URL)", err)
		}
		return nil, failErr(err)
	}
	return conn, nil
}

// connectCommand loads the settings and connects as name (connect).
func (f *connFlags) connectCommand(ctx context.Context, name string, stderr io.Writer) (config.Config, *nats.Conn, error) {
	cfg, log, err := loadSettings(stderr)
	if err != nil {
		return cfg, nil, err
	}
	nc, err := f.connect(ctx, cfg, name, log)
	return cfg, nc, err
}

// embeddedFlagOrigin is where run --embedded says its server came from.
const embeddedFlagOrigin = "the embedded server (--embedded: NATS_URL and nats CLI contexts are not read)"

// embeddedConflict names the flag or setting that chooses a server beside --embedded, or "" when none does.
func embeddedConflict(f *connFlags, cfg config.Config) string {
	switch {
	case f.server != "":
		return "--server"
	case f.context != "":
		return "--context"
	case f.creds != "" || f.nkey != "" || f.tlsCA != "" || f.tlsCert != "":
		return "the credential and TLS flags"
	case cfg.NatsURL != "":
		return "DEDUPE_NATS_URL"
	case cfg.NatsConfigured():
		return "the DEDUPE_NATS_* connection settings"
	}
	return ""
}

// connParts is a connection being assembled from the layers, with where each part came from.
type connParts struct {
	url, ca, cert, key part
	auth               auth   // one kind of credentials, replaced whole by a layer that sets any
	authFrom           string // where auth came from
	inboxPrefix        string
	tlsFirst           bool
}

// part is one part of a connection and where it came from ("-s", "DEDUPE_NATS_TLS_CA", a context).
type part struct{ value, from string }

// auth is one kind of credentials: user and password, token, creds file or nkey seed file.
type auth struct{ user, password, token, creds, nkey string }

// partFrom is value v and where it came from; an empty part when v is empty.
func partFrom(v, from string) part { return part{v, ifSet(v, from)} }

// resolve turns the flags and settings into the connection settings (see connFlags for the order), without
// connecting. embedded is true when no layer names a server. Files named by flags, NATS_* variables or a context
// must be readable. Errors are usage errors (*exitError, status 2) naming the command and where the value came from.
func (f *connFlags) resolve(cfg config.Config) (c natsconn.Config, embedded bool, err error) {
	bad := func(format string, a ...any) (natsconn.Config, bool, error) {
		return natsconn.Config{}, false, usageErr("%s: %s", f.cmd, fmt.Sprintf(format, a...))
	}
	var p connParts
	f.cliURL = ""
	if f.embedded {
		if conflict := embeddedConflict(f, cfg); conflict != "" {
			return bad("--embedded and %s exclude each other: give one", conflict)
		}
		return natsconn.Config{Origin: embeddedFlagOrigin}, true, nil
	}
	switch {
	case f.context != "":
		if p, err = cliLayer(f.context); err != nil {
			return bad("--context: %v", err)
		}
	case cfg.NatsConfigured():
		p = connParts{url: partFrom(cfg.NatsURL, "DEDUPE_NATS_URL"), ca: partFrom(cfg.NatsTLSCa, "DEDUPE_NATS_TLS_CA"),
			cert: partFrom(cfg.NatsTLSCert, "DEDUPE_NATS_TLS_CERT"),
			key:  partFrom(cfg.NatsTLSKey, "DEDUPE_NATS_TLS_KEY"),
			auth: auth{creds: cfg.NatsCreds, nkey: cfg.NatsNkeySeedFile}}
		// One of the two at most: config.Validate refuses both.
		p.authFrom = ifSet(cfg.NatsCreds, "DEDUPE_NATS_CREDS") +
			ifSet(cfg.NatsNkeySeedFile, "DEDUPE_NATS_NKEY_SEED_FILE")
	default:
		name, how := os.Getenv("NATS_CONTEXT"), "NATS_CONTEXT"
		if name == "" {
			var file string
			if name, file, err = natsconn.SelectedContext(); err != nil {
				return bad("%v", err)
			}
			how = "the context selected in " + file
		}
		if p, err = cliLayer(name); err != nil {
			return bad("%s: %v (set DEDUPE_NATS_URL, or pass -s or --context, to connect elsewhere)", how, err)
		}
	}

	// Flags, each over its own part.
	if f.server != "" {
		p.url = part{f.server, "-s"}
	}
	switch {
	case f.creds != "" && f.nkey != "":
		return bad("--creds and --nkey exclude each other: give one")
	case f.creds != "":
		p.auth, p.authFrom = auth{creds: f.creds}, "--creds"
	case f.nkey != "":
		p.auth, p.authFrom = auth{nkey: f.nkey}, "--nkey"
	}
	if f.tlsCA != "" {
		p.ca = part{f.tlsCA, "--tlsca"}
	}
	switch {
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return bad("--tlscert and --tlskey go together: give both")
	case f.tlsCert != "":
		p.cert, p.key = part{f.tlsCert, "--tlscert"}, part{f.tlsKey, "--tlskey"}
	}

	if (p.cert.value == "") != (p.key.value == "") {
		return bad("a client certificate needs its key: certificate %q (%s), key %q (%s)",
			p.cert.value, cmp.Or(p.cert.from, "none"), p.key.value, cmp.Or(p.key.from, "none"))
	}
	files := []part{partFrom(p.auth.creds, p.authFrom), partFrom(p.auth.nkey, p.authFrom), p.ca, p.cert, p.key}
	for _, file := range files {
		if file.value == "" {
			continue
		}
		fh, err := os.Open(file.value)
		if err != nil {
			return bad("%s: %v", file.from, err)
		}
		fh.Close()
	}

	a := p.auth
	c = natsconn.Config{
		URL: p.url.value, User: a.user, Password: a.password, Token: a.token, Creds: a.creds, NkeySeedFile: a.nkey,
		TLSCA: p.ca.value, TLSCert: p.cert.value, TLSKey: p.key.value, TLSFirst: p.tlsFirst, InboxPrefix: p.inboxPrefix,
	}
	if p.url.value != "" {
		// Malformed, it is a configuration error; dialled, it would be retried as if the server were not up yet.
		if err := natsconn.CheckURL(p.url.value); err != nil {
			return bad("%s: %v", p.url.from, err)
		}
		c.Origin = "url from " + p.url.from
		if f.context == "" && !cfg.NatsConfigured() && f.server == "" {
			f.cliURL = p.url.from
		}
	}
	if p.authFrom != "" {
		c.Origin = joinOrigin(c.Origin, "credentials from "+p.authFrom)
	}
	return c, p.url.value == "", nil
}

// cliLayer is what the nats CLI would connect with: the NATS_* variables it reads over the context called name
// (none when name is empty). NATS_USER without NATS_PASSWORD is a token, as in the CLI.
func cliLayer(name string) (connParts, error) {
	var p connParts
	if name != "" {
		cx, err := natsconn.LoadContext(name)
		if err != nil {
			return connParts{}, err
		}
		from := fmt.Sprintf("context %q (%s)", cx.Name, cx.Path)
		p = connParts{url: part{cx.URL, from}, ca: partFrom(cx.CA, from), cert: partFrom(cx.Cert, from),
			key: partFrom(cx.Key, from), inboxPrefix: cx.InboxPrefix, tlsFirst: cx.TLSFirst}
		if cx.User != "" || cx.Token != "" || cx.Creds != "" || cx.NKey != "" {
			p.auth, p.authFrom = auth{cx.User, cx.Password, cx.Token, cx.Creds, cx.NKey}, from
		}
	}
	user, pass, creds, nkey := os.Getenv("NATS_USER"), os.Getenv("NATS_PASSWORD"), os.Getenv("NATS_CREDS"), os.Getenv("NATS_NKEY")
	var kinds []string
	for _, k := range []struct{ name, v string }{{"NATS_USER", user}, {"NATS_CREDS", creds}, {"NATS_NKEY", nkey}} {
		if k.v != "" {
			kinds = append(kinds, k.name)
		}
	}
	switch {
	case len(kinds) > 1:
		return connParts{}, fmt.Errorf("%s are set: choose one way to authenticate", strings.Join(kinds, " and "))
	case pass != "" && user == "":
		return connParts{}, fmt.Errorf("NATS_PASSWORD is set without NATS_USER")
	case user != "" && pass != "":
		p.auth, p.authFrom = auth{user: user, password: pass}, "NATS_USER and NATS_PASSWORD"
	case user != "":
		p.auth, p.authFrom = auth{token: user}, "NATS_USER (a token)"
	case creds != "":
		p.auth, p.authFrom = auth{creds: creds}, "NATS_CREDS"
	case nkey != "":
		p.auth, p.authFrom = auth{nkey: nkey}, "NATS_NKEY"
	}
	vars := map[string]*part{"NATS_URL": &p.url, "NATS_CA": &p.ca, "NATS_CERT": &p.cert, "NATS_KEY": &p.key}
	for name, dst := range vars {
		if v := os.Getenv(name); v != "" {
			*dst = part{v, name}
		}
	}
	return p, nil
}

// ifSet is from when v is set, else "".
func ifSet(v, from string) string {
	if v == "" {
		return ""
	}
	return from
}

func joinOrigin(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), ", ")
}
