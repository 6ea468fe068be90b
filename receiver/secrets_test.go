package receiver_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// verifies reports whether a GitHub-style delivery signed with secret verifies for tenant and source, and whether
// the policy serves that tenant and source at all.
func verifies(t *testing.T, p *receiver.Policy, tenant, source, secret string) (served, ok bool) {
	t.Helper()
	v, served := p.Verifier(tenant, source)
	if !served {
		return false, false
	}
	body := `{"a":1}`
	return true, v.Verify(hdr("X-Hub-Signature-256", githubSig(secret, body)), []byte(body)) == nil
}

// A secrets directory laid out as a Kubernetes Secret volume mounts it (each key a symbolic link through ..data
// into a timestamped directory), files with CRLF lines, blank lines and a byte-order mark, variables with comma
// lists; a tenant's own file replaces the source's secrets for that tenant.
func TestReceiverSecretsLoading(t *testing.T) {
	dir := t.TempDir()
	stamp := filepath.Join(dir, "..2026_01_02_03_04_05.000000001")
	if err := os.Mkdir(stamp, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(stamp, "gh"), "\uFEFFgh-file-OLD-1\r\n\r\n  gh-file-NEW-2  \r\n")
	writeFile(t, filepath.Join(stamp, "acme.gh"), "gh-acme-OWN-3")
	writeFile(t, filepath.Join(stamp, "my-app"), "app-secret-4\n")
	for _, link := range [][2]string{{"..data", filepath.Base(stamp)}, {"gh", "..data/gh"}, {"acme.gh", "..data/acme.gh"}, {"my-app", "..data/my-app"}} {
		if err := os.Symlink(link[1], filepath.Join(dir, link[0])); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, ".hidden"), "not read")
	src := mustSources(t, `sources:
  gh: {verify: github}
  shop: {verify: github}
  my-app: {verify: github}
  sig: {verify: {scheme: hmac, header: X-Sig}}
`)
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{
		Dir: dir,
		Environ: []string{
			"DEDUPE_INGEST_SECRET_SHOP= shop-env-OLD-5 , shop-env-NEW-6,",
			"DEDUPE_INGEST_SECRET_SHOP=ignored-second-entry",
			"DEDUPE_INGEST_SECRET_SIG=", // empty: unset
			"DEDUPE_INGEST_SECRETS_DIR=" + dir,
			"OTHER=x",
		},
		Sources: src.IDs(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets}); err == nil ||
		!strings.Contains(err.Error(), "sources.sig.verify: scheme hmac needs a secret: set DEDUPE_INGEST_SECRET_SIG") {
		t.Fatalf("an empty variable must count as unset: %v", err)
	}
	delete(src.Specs, "sig")
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, source, secret string
		served, ok             bool
	}{
		{"globex", "gh", "gh-file-OLD-1", true, true},
		{"globex", "gh", "gh-file-NEW-2", true, true}, // rotation: both lines verify
		{"globex", "gh", "gh-acme-OWN-3", true, false},
		{"acme", "gh", "gh-acme-OWN-3", true, true},  // the tenant's own file ...
		{"acme", "gh", "gh-file-OLD-1", true, false}, // ... replaces the source's secrets
		{"acme", "shop", "shop-env-OLD-5", true, true},
		{"acme", "shop", "shop-env-NEW-6", true, true},
		{"acme", "shop", "ignored-second-entry", true, false},
		{"acme", "my-app", "app-secret-4", true, true},
		{"acme", "sig", "x", false, false},
	} {
		served, ok := verifies(t, p, c.tenant, c.source, c.secret)
		if served != c.served || ok != c.ok {
			t.Errorf("%s/%s signed with %s: served %v verified %v, want %v %v", c.tenant, c.source, c.secret, served, ok, c.served, c.ok)
		}
	}
	want := "gh (every tenant): 2 secrets from secrets directory " + filepath.Join(dir, "gh") +
		"; gh (tenant acme): 1 secret from secrets directory " + filepath.Join(dir, "acme.gh") +
		"; my-app (every tenant): 1 secret from secrets directory " + filepath.Join(dir, "my-app") +
		"; shop (every tenant): 2 secrets from DEDUPE_INGEST_SECRET_SHOP"
	if got := secrets.String(); got != want {
		t.Errorf("String:\n%s\nwant\n%s", got, want)
	}
	infos := p.Sources()
	if len(infos) != 3 || infos[0].Source != "gh" || !infos[0].AllTenant || len(infos[0].Tenants) != 1 || infos[0].Tenants[0] != "acme" {
		t.Errorf("Sources: %+v", infos)
	}
}

// Secrets never show: not through any fmt verb, not through slog, not in an error.
func TestReceiverSecretsNeverShown(t *testing.T) {
	p := testPolicy(t)
	src := mustSources(t, testSources)
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: testSecretsDir(t), Environ: testEnviron(), Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		fmt.Fprintf(&out, verb+"\n", secrets)
		fmt.Fprintf(&out, verb+"\n", *secrets)
		fmt.Fprintf(&out, verb+"\n", p)
		fmt.Fprintf(&out, verb+"\n", *p)
		fmt.Fprintf(&out, verb+"\n", []any{secrets, p})
	}
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("x", "secrets", secrets, "policy", p)
	slog.New(slog.NewTextHandler(&out, nil)).Info("x", "secrets", secrets, "policy", p)
	noSecretIn(t, "formatting", out.String())
	if !strings.Contains(out.String(), "2 secrets from DEDUPE_INGEST_SECRET_GH") {
		t.Errorf("formatting does not say what was loaded:\n%s", out.String())
	}

	// Errors that are about secrets name the variable or file, never the value.
	dup := []string{"DEDUPE_INGEST_SECRET_GH=" + ghOld + "," + ghOld, "DEDUPE_INGEST_SECRET_SW=" + ghNew}
	secrets, err = receiver.LoadSecrets(receiver.SecretsConfig{Environ: dup, Sources: []string{"gh", "sw"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: mustSources(t, "sources: {gh: {verify: github}, sw: {verify: standard_webhooks}}"), Secrets: secrets})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"receiver: DEDUPE_INGEST_SECRET_GH: secret 2: same as secret 1", "receiver: DEDUPE_INGEST_SECRET_SW: secret 1: not base64"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	noSecretIn(t, "error", err.Error())
}

func TestReceiverSecretsErrors(t *testing.T) {
	sources := []string{"gh", "st", "my-app", "my_app"}
	for _, c := range []struct {
		name    string
		files   map[string]string // name -> content; "/" makes a directory
		environ []string
		noDir   bool
		want    []string
	}{
		{name: "three parts", files: map[string]string{"a.b.gh": ghOld}, want: []string{"a.b.gh: the name must be <source> (every tenant) or <tenant>.<source>"}},
		{name: "bad characters", files: map[string]string{"gh secret": ghOld}, want: []string{"gh secret: the name must be"}},
		{name: "undeclared source in a file", files: map[string]string{"acme.githb": ghOld}, want: []string{`acme.githb: source "githb" is not declared (declared: gh, my-app, my_app, st)`}},
		{name: "empty file", files: map[string]string{"gh": "\n  \r\n"}, want: []string{"gh: holds no secret (one per line)"}},
		{name: "a directory", files: map[string]string{"gh": "/"}, want: []string{"gh: is a directory"}},
		{name: "no directory", noDir: true, want: []string{"receiver: secrets directory", "no such file or directory"}},
		{name: "undeclared source in a variable", environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=" + ghOld},
			want: []string{"DEDUPE_INGEST_SECRET_GITHUB: names no declared source"}},
		{name: "lower case variable", environ: []string{"DEDUPE_INGEST_SECRET_gh=" + ghOld}, want: []string{"DEDUPE_INGEST_SECRET_gh: names no declared source"}},
		{name: "ambiguous variable", environ: []string{"DEDUPE_INGEST_SECRET_MY_APP=" + ghOld},
			want: []string{"DEDUPE_INGEST_SECRET_MY_APP: could hold the secrets of sources my-app or my_app: put them in files"}},
		{name: "variable and file", files: map[string]string{"gh": ghOld}, environ: []string{"DEDUPE_INGEST_SECRET_GH=" + ghNew},
			want: []string{"DEDUPE_INGEST_SECRET_GH and secrets directory", "both give the secrets of source gh for every tenant: keep one"}},
		{name: "all problems at once", files: map[string]string{"x.y.z": ghOld, "nope": ghOld}, environ: []string{"DEDUPE_INGEST_SECRET_NOPE=" + ghOld},
			want: []string{"x.y.z: the name", `"nope" is not declared`, "DEDUPE_INGEST_SECRET_NOPE: names no declared source"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				if content == "/" {
					if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
						t.Fatal(err)
					}
					continue
				}
				writeFile(t, filepath.Join(dir, name), content)
			}
			if c.noDir {
				dir = filepath.Join(dir, "missing")
			}
			_, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: dir, Environ: c.environ, Sources: sources})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "receiver: ") {
					t.Errorf("error line without the package prefix: %q", line)
				}
			}
			noSecretIn(t, "error", err.Error())
		})
	}
}

func TestReceiverPolicyErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		sources string
		environ []string
		want    []string
	}{
		{"no verify block", "sources: {orders: {dedupe: {json: id}}, gh: {verify: none}}", nil,
			[]string{"receiver: sources.orders: no verify block: declare how its deliveries are verified, verify: <scheme> (github, hmac, shopify, standard_webhooks, stripe, svix) or verify: none"}},
		{"no secret", "sources: {gh: {verify: github}}", nil,
			[]string{"receiver: sources.gh.verify: scheme github needs a secret: set DEDUPE_INGEST_SECRET_GH, or put a file gh (every tenant) or <tenant>.gh in the secrets directory"}},
		{"none with a secret", "sources: {gh: {verify: none}}", []string{"DEDUPE_INGEST_SECRET_GH=" + ghOld},
			[]string{"receiver: sources.gh.verify: scheme none takes no secrets, but DEDUPE_INGEST_SECRET_GH gives some"}},
		{"hmac without header", "sources: {sig: {verify: hmac}}", []string{"DEDUPE_INGEST_SECRET_SIG=" + hmacSecret},
			[]string{"receiver: sources.sig.verify.header: required for scheme hmac"}},
		{"hmac option on github", "sources: {gh: {verify: {scheme: github, algorithm: sha1}}}", []string{"DEDUPE_INGEST_SECRET_GH=" + ghOld},
			[]string{"receiver: sources.gh.verify.algorithm: only for scheme hmac"}},
		{"unknown scheme, no secret", "sources: {gh: {verify: gitlab}}", nil,
			[]string{`receiver: sources.gh.verify.scheme: not a known scheme (want one of github, hmac, none, shopify, standard_webhooks, stripe, svix; got "gitlab")`}},
		{"tolerance on github", "sources: {gh: {verify: {scheme: github, tolerance: 1m}}}", []string{"DEDUPE_INGEST_SECRET_GH=" + ghOld},
			[]string{"receiver: sources.gh.verify.tolerance: scheme github signs no timestamp"}},
		{"several sources", "sources: {a: {}, b: {verify: github}}", nil,
			[]string{"sources.a: no verify block", "sources.b.verify: scheme github needs a secret"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := mustSources(t, c.sources)
			secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: c.environ, Sources: src.IDs()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			noSecretIn(t, "error", err.Error())
		})
	}
}

// With no sources document, each preset is a source: served with its own scheme once it has a secret.
func TestReceiverPolicyPresets(t *testing.T) {
	src := keys.PresetSources()
	_, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, FromPresets: true})
	if err == nil || !strings.Contains(err.Error(), "receiver: no source can be served") ||
		!strings.Contains(err.Error(), "DEDUPE_INGEST_SECRET_GITHUB, DEDUPE_INGEST_SECRET_SHOPIFY") {
		t.Fatalf("no secrets at all: %v", err)
	}
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=" + ghOld}, Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, FromPresets: true, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Sources(); len(s) != 1 || s[0].Source != "github" || s[0].Scheme != verify.SchemeGitHub || s[0].OnInvalid != keys.OnInvalidReject {
		t.Errorf("served: %+v", s)
	}
	unserved := map[string]string{}
	for _, u := range p.Unserved() {
		unserved[u.Source] = u.Reason
	}
	if len(unserved) != 5 || !strings.Contains(unserved["stripe"], "no secret: set DEDUPE_INGEST_SECRET_STRIPE") ||
		!strings.Contains(unserved["salesforce"], "no signature scheme") {
		t.Errorf("unserved: %v", unserved)
	}
	if served, ok := verifies(t, p, "acme", "github", ghOld); !served || !ok {
		t.Errorf("github: served %v verified %v", served, ok)
	}
	if _, served := p.Verifier("acme", "stripe"); served {
		t.Error("stripe is served without a secret")
	}
	// A secret for a preset that has no scheme would be ignored: it is an error instead.
	secrets, err = receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_SALESFORCE=" + ghOld}, Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, FromPresets: true, Secrets: secrets}); err == nil ||
		!strings.Contains(err.Error(), "receiver: preset source salesforce has secrets but no signature scheme of its own") {
		t.Errorf("a secret for salesforce: %v", err)
	}
}

// on_invalid applies to sources that verify; with verify: none nothing ever fails.
func TestReceiverPolicyOnInvalid(t *testing.T) {
	src := mustSources(t, "sources: {a: {verify: none, on_invalid: forward}, b: {verify: github, on_invalid: forward}, c: {verify: github, on_invalid: reject}}")
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_B=" + ghOld, "DEDUPE_INGEST_SECRET_C=" + ghNew}, Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range p.Sources() {
		got[s.Source] = s.OnInvalid
	}
	if got["a"] != "reject" || got["b"] != "forward" || got["c"] != "reject" {
		t.Errorf("on_invalid: %v", got)
	}
	v, _ := p.Verifier("acme", "a")
	if err := v.Verify(http.Header{}, nil); err != nil || errors.Is(err, verify.ErrMissing) {
		t.Errorf("verify none: %v", err)
	}
}
