package natsconn

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// CLIContext is a connection context saved by the nats CLI (`nats context add|edit|select`), reduced to what a
// Config can use. The CLI keeps each context in <config>/nats/context/<name>.json and the selected one's name in
// <config>/nats/context.txt, where <config> is $XDG_CONFIG_HOME, else ~/.config (ADR-21 of nats-io).
type CLIContext struct {
	Name string `json:"-"` // the context's name
	Path string `json:"-"` // the file it was read from

	URL         string `json:"url"` // comma-separated URLs; nats://127.0.0.1:4222 when the context sets none, as in the CLI
	User        string `json:"user"`
	Password    string `json:"password"`
	Token       string `json:"token"`
	Creds       string `json:"creds"` // path to a .creds file
	NKey        string `json:"nkey"`  // path to an nkey seed file
	Cert        string `json:"cert"`  // path to a PEM client certificate
	Key         string `json:"key"`   // path to its key
	CA          string `json:"ca"`    // path to a PEM CA bundle
	InboxPrefix string `json:"inbox_prefix"`
	TLSFirst    bool   `json:"tls_first"`
}

// ErrUnknownContext is wrapped by LoadContext's error when no file holds the named context.
var ErrUnknownContext = errors.New("no such context")

// unsupportedContextFields are the context fields that would change how the connection or JetStream is used but
// that a Config cannot carry: a context setting one is refused rather than half-applied. description, color_scheme,
// name and jetstream_event_prefix (advisory subjects, which the worker never reads) are ignored, as are fields a
// later CLI may add.
var unsupportedContextFields = []struct{ field, why string }{
	{"nsc", "nsc:// lookups are not supported: give the creds file in \"creds\" and the servers in \"url\""},
	{"jetstream_domain", "JetStream domains are not supported: the commands use the account's own JetStream API ($JS.API)"},
	{"jetstream_api_prefix", "JetStream API prefixes are not supported: the commands use the account's own JetStream API ($JS.API)"},
	{"user_jwt", "a user JWT without a creds file is not supported: use \"creds\""},
	{"socks_proxy", "SOCKS proxies are not supported"},
	{"windows_cert_store", "the Windows certificate store is not supported: use \"cert\", \"key\" and \"ca\" files"},
	{"windows_cert_match_by", "the Windows certificate store is not supported: use \"cert\", \"key\" and \"ca\" files"},
	{"windows_cert_match", "the Windows certificate store is not supported: use \"cert\", \"key\" and \"ca\" files"},
	{"windows_ca_certs_match", "the Windows certificate store is not supported: use \"cert\", \"key\" and \"ca\" files"},
}

// CLIConfigDir is where the nats CLI keeps its configuration: $XDG_CONFIG_HOME/nats, else ~/.config/nats.
func CLIConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		u, uerr := user.Current()
		if uerr != nil || u.HomeDir == "" {
			return "", fmt.Errorf("natsconn: nats CLI configuration: no home directory and no XDG_CONFIG_HOME: %w", errors.Join(err, uerr))
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".config", "nats"), nil
}

// SelectedContext returns the name of the context `nats context select` chose, read from context.txt, and that
// file's path. The name is empty when no context is selected (or no home directory is known).
func SelectedContext() (name, file string, err error) {
	dir, err := CLIConfigDir()
	if err != nil {
		return "", "", nil
	}
	file = filepath.Join(dir, "context.txt")
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", file, nil
	}
	if err != nil {
		return "", file, fmt.Errorf("natsconn: selected nats context: %w", err)
	}
	return strings.TrimSpace(string(data)), file, nil
}

// contextFile is the file that holds the context called name.
func contextFile(name string) (string, error) {
	if name == "" || strings.Contains(name, "..") || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("natsconn: context %q: invalid name (a context name is not empty and has no \"..\", \"/\" or \"\\\")", name)
	}
	dir, err := CLIConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "context", name+".json"), nil
}

// LoadContext reads the context called nameOrFile or, when nameOrFile ends in .json and names an existing file,
// that file (as `nats --context` does). Paths in it may start with ~ or hold $VARIABLES; password and token may be
// env://VARIABLE or file://PATH references. A context that sets a field a Config cannot carry is refused.
func LoadContext(nameOrFile string) (CLIContext, error) {
	c := CLIContext{Name: nameOrFile}
	if st, err := os.Stat(nameOrFile); err == nil && !st.IsDir() && strings.HasSuffix(nameOrFile, ".json") {
		c.Name, c.Path = strings.TrimSuffix(filepath.Base(nameOrFile), ".json"), nameOrFile
	} else {
		path, err := contextFile(nameOrFile)
		if err != nil {
			return CLIContext{}, err
		}
		c.Path = path
	}
	data, err := os.ReadFile(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return CLIContext{}, fmt.Errorf("natsconn: context %q: %w: %s does not exist", c.Name, ErrUnknownContext, c.Path)
	}
	if err != nil {
		return CLIContext{}, fmt.Errorf("natsconn: context %q: %w", c.Name, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("natsconn: context %q (%s): %s", c.Name, c.Path, fmt.Sprintf(format, a...))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return CLIContext{}, bad("not a context file: %v", err)
	}
	for _, u := range unsupportedContextFields {
		if v, ok := raw[u.field]; ok && !emptyJSON(v) {
			return CLIContext{}, bad("%s is set: %s", u.field, u.why) // never the value: it may be a secret
		}
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return CLIContext{}, bad("%v", err)
	}
	c.URL = cmp.Or(strings.TrimSpace(c.URL), nats.DefaultURL)
	for _, f := range []struct {
		field string
		v     *string
		ref   func(string) (string, error)
	}{{"password", &c.Password, secretRef}, {"token", &c.Token, secretRef}, {"creds", &c.Creds, pathRef},
		{"nkey", &c.NKey, pathRef}, {"cert", &c.Cert, pathRef}, {"key", &c.Key, pathRef}, {"ca", &c.CA, pathRef}} {
		v, err := f.ref(*f.v)
		if err != nil {
			return CLIContext{}, bad("%s: %v", f.field, err)
		}
		*f.v = v
	}
	var kinds []string
	for _, k := range []struct{ name, v string }{{"user", c.User}, {"token", c.Token}, {"creds", c.Creds}, {"nkey", c.NKey}} {
		if k.v != "" {
			kinds = append(kinds, k.name)
		}
	}
	if len(kinds) > 1 {
		return CLIContext{}, bad("sets %s: choose one way to authenticate", strings.Join(kinds, " and "))
	}
	if c.Password != "" && c.User == "" {
		return CLIContext{}, bad("password is set without user")
	}
	if (c.Cert == "") != (c.Key == "") {
		return CLIContext{}, bad("cert and key go together: set both or neither")
	}
	return c, nil
}

// emptyJSON reports whether a JSON value carries nothing: absent-like values the CLI writes for unset fields.
func emptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", `""`, "null", "[]", "{}", "false":
		return true
	}
	return false
}

// secretRef resolves a password or token: env://NAME (the variable's value) and file://PATH (the file's content
// without trailing line breaks) as the CLI resolves them; other credential references are refused rather than sent
// to the server as a literal password.
func secretRef(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "env://"):
		name := strings.TrimPrefix(v, "env://")
		val, ok := os.LookupEnv(name)
		if name == "" || !ok || val == "" {
			return "", fmt.Errorf("refers to the environment variable %q, which is not set or empty", name)
		}
		return val, nil
	case strings.HasPrefix(v, "file://"):
		data, err := os.ReadFile(expandPath(strings.TrimPrefix(v, "file://")))
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(data), "\r\n"), nil
	}
	if scheme := unsupportedRef(v); scheme != "" {
		return "", fmt.Errorf("%s references are not supported: give the value, env://NAME or file://PATH", scheme)
	}
	return v, nil
}

// pathRef resolves a file field: file:// is dropped, ~ and $VARIABLES are expanded.
func pathRef(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if scheme := unsupportedRef(v); scheme != "" || strings.HasPrefix(v, "env://") {
		scheme = cmp.Or(scheme, "env://")
		return "", fmt.Errorf("%s references are not supported: give a file path", scheme)
	}
	return expandPath(strings.TrimPrefix(v, "file://")), nil
}

// unsupportedRef is the scheme of a credential reference the CLI resolves with tools this package does not have.
func unsupportedRef(v string) string {
	for _, s := range []string{"op://", "nsc://", "data:"} {
		if strings.HasPrefix(strings.ToLower(v), s) {
			return s
		}
	}
	return ""
}

// expandPath expands a leading ~ to the home directory and $VARIABLES, as the CLI does for context paths.
func expandPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return os.ExpandEnv(p)
}
