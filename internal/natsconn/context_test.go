package natsconn_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

// cliHome points XDG_CONFIG_HOME at a fresh directory and writes the given contexts (name → JSON) and, when
// selected is not empty, context.txt. It returns the nats directory.
func cliHome(t *testing.T, selected string, contexts map[string]string) string {
	t.Helper()
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	dir := filepath.Join(xdg, "nats")
	if err := os.MkdirAll(filepath.Join(dir, "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, doc := range contexts {
		if err := os.WriteFile(filepath.Join(dir, "context", name+".json"), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if selected != "" {
		if err := os.WriteFile(filepath.Join(dir, "context.txt"), []byte(selected+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadContextFields(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CERTS", "/etc/certs")
	t.Setenv("CTX_TEST_PASSWORD", "from-env")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("from-file\n"), 0o600)
	dir := cliHome(t, "", map[string]string{
		// What `nats context save` writes: every field, empty ones included.
		"full": `{"description":"a context","url":"nats://a:4222,nats://b:4222","socks_proxy":"","token":"","user":"u",
			"password":"p","creds":"","nkey":"","cert":"~/certs/c.pem","key":"$CERTS/k.pem","ca":"file:///etc/ca.pem",
			"nsc":"","jetstream_domain":"","jetstream_api_prefix":"","jetstream_event_prefix":"$JS.EVENT","inbox_prefix":"_I.me",
			"user_jwt":"","color_scheme":"","tls_first":true,"windows_cert_store":"","windows_ca_certs_match":[],
			"a_field_of_a_later_cli":"x"}`,
		"bare":     `{}`,
		"envpass":  `{"user":"u","password":"env://CTX_TEST_PASSWORD"}`,
		"filetok":  `{"token":"file://` + tokenFile + `"}`,
		"creds":    `{"creds":"~/my.creds"}`,
		"dotted.a": `{"nkey":"/k.nk"}`,
	})
	c, err := natsconn.LoadContext("full")
	if err != nil {
		t.Fatal(err)
	}
	want := natsconn.CLIContext{Name: "full", Path: filepath.Join(dir, "context", "full.json"), URL: "nats://a:4222,nats://b:4222",
		User: "u", Password: "p", Cert: filepath.Join(home, "certs/c.pem"), Key: "/etc/certs/k.pem", CA: "/etc/ca.pem",
		InboxPrefix: "_I.me", TLSFirst: true}
	if c != want {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	for name, check := range map[string]func(natsconn.CLIContext) bool{
		"bare":     func(c natsconn.CLIContext) bool { return c.URL == "nats://127.0.0.1:4222" && c.User == "" },
		"envpass":  func(c natsconn.CLIContext) bool { return c.Password == "from-env" },
		"filetok":  func(c natsconn.CLIContext) bool { return c.Token == "from-file" },
		"creds":    func(c natsconn.CLIContext) bool { return c.Creds == filepath.Join(home, "my.creds") },
		"dotted.a": func(c natsconn.CLIContext) bool { return c.NKey == "/k.nk" && c.Name == "dotted.a" },
	} {
		c, err := natsconn.LoadContext(name)
		if err != nil || !check(c) {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
	// A path to a .json file works as the name, as with `nats --context`.
	c, err = natsconn.LoadContext(filepath.Join(dir, "context", "envpass.json"))
	if err != nil || c.Name != "envpass" || c.Password != "from-env" {
		t.Errorf("by path: %+v %v", c, err)
	}
}

func TestLoadContextRefuses(t *testing.T) {
	t.Setenv("CTX_TEST_UNSET", "")
	dir := cliHome(t, "", map[string]string{
		"domain":  `{"url":"nats://hub:4222","jetstream_domain":"leaf"}`,
		"prefix":  `{"jetstream_api_prefix":"$JS.hub.API"}`,
		"nsc":     `{"nsc":"nsc://op/acc/user"}`,
		"jwt":     `{"user_jwt":"eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.secret-jwt-body"}`,
		"socks":   `{"socks_proxy":"socks5://p:1080"}`,
		"winca":   `{"windows_ca_certs_match":["x"]}`,
		"two":     `{"user":"u","password":"p","creds":"/x.creds"}`,
		"nouser":  `{"password":"p"}`,
		"halfkey": `{"cert":"/c.pem"}`,
		"op":      `{"user":"u","password":"op://vault/nats/password"}`,
		"envnone": `{"token":"env://CTX_TEST_UNSET"}`,
		"opcreds": `{"creds":"op://vault/nats/creds"}`,
		"badjson": `{"url":`,
		"badtype": `{"tls_first":"yes"}`,
	})
	cases := map[string]string{
		"domain":  "jetstream_domain is set: JetStream domains are not supported",
		"prefix":  "jetstream_api_prefix is set",
		"nsc":     "nsc is set: nsc:// lookups are not supported",
		"jwt":     "user_jwt is set",
		"socks":   "socks_proxy is set",
		"winca":   "windows_ca_certs_match is set",
		"two":     "sets user and creds: choose one way to authenticate",
		"nouser":  "password is set without user",
		"halfkey": "cert and key go together",
		"op":      "password: op:// references are not supported",
		"envnone": `token: refers to the environment variable "CTX_TEST_UNSET", which is not set or empty`,
		"opcreds": "creds: op:// references are not supported",
		"badjson": "not a context file",
		"badtype": "tls_first",
	}
	for name, want := range cases {
		_, err := natsconn.LoadContext(name)
		path := filepath.Join(dir, "context", name+".json")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), `natsconn: context "`+name+`" (`+path+`): `) {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret-jwt-body") || strings.Contains(err.Error(), "vault")) {
			t.Errorf("%s: the error shows the value: %v", name, err)
		}
	}
}

func TestLoadContextUnknownAndInvalid(t *testing.T) {
	dir := cliHome(t, "", nil)
	_, err := natsconn.LoadContext("nope")
	want := filepath.Join(dir, "context", "nope.json")
	if !errors.Is(err, natsconn.ErrUnknownContext) || !strings.Contains(err.Error(), want+" does not exist") {
		t.Errorf("unknown: %v (want it to name %s)", err, want)
	}
	for _, name := range []string{"../etc/passwd", "a/b", `a\b`, ".."} {
		if _, err := natsconn.LoadContext(name); err == nil || !strings.Contains(err.Error(), "invalid name") {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func TestSelectedContext(t *testing.T) {
	dir := cliHome(t, "", nil)
	name, file, err := natsconn.SelectedContext()
	if name != "" || err != nil || file != filepath.Join(dir, "context.txt") {
		t.Errorf("none selected: %q %q %v", name, file, err)
	}
	cliHome(t, "dev", nil)
	if name, _, err := natsconn.SelectedContext(); name != "dev" || err != nil {
		t.Errorf("selected: %q %v", name, err)
	}
	// Without XDG_CONFIG_HOME, ~/.config/nats.
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", home)
	if d, err := natsconn.CLIConfigDir(); err != nil || d != filepath.Join(home, ".config", "nats") {
		t.Errorf("config dir %q %v", d, err)
	}
}
