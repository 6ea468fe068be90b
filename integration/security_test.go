package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// pki is a CA with a server and a client certificate, written as PEM files.
type pki struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newPKI generates a CA and two leaf certificates (server for 127.0.0.1/localhost, client) into dir.
func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	serial := int64(1)
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := pki{CA: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.CA, "CERTIFICATE", caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, certPath, keyPath *string) {
		serial++
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		*certPath, *keyPath = filepath.Join(dir, name+"-"+cn+".pem"), filepath.Join(dir, name+"-"+cn+"-key.pem")
		writePEM(t, *certPath, "CERTIFICATE", der)
		writePEM(t, *keyPath, "PRIVATE KEY", keyDER)
	}
	leaf("server", x509.ExtKeyUsageServerAuth, &p.ServerCert, &p.ServerKey)
	leaf("client", x509.ExtKeyUsageClientAuth, &p.ClientCert, &p.ClientKey)
	return p
}

// smallRun pushes a small mixed workload through one worker and balances the ledger.
func smallRun(t *testing.T, c *Client, vars map[string]string, n int, s uint64) (*Worker, *Report) {
	t.Helper()
	ws := StartWorkers(t, 1, vars)
	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex"}, DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.01, Seed: s})
	publishAll(t, c, envs)
	c.WaitQuiet(t, uint64(n), time.Minute)
	return ws[0], c.Ledger(t, envs, nil)
}

// failFast runs the worker with a wrong credential: it must exit non-zero within a few seconds, say why, and never
// print the secrets.
func failFast(t *testing.T, what string, vars map[string]string, secrets ...string) {
	t.Helper()
	code, out, elapsed := RunOnce(t, vars, 30*time.Second)
	last := strings.TrimSpace(out)
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	t.Logf("%s: exit %d after %s: %s", what, code, elapsed.Round(time.Millisecond), last)
	switch {
	case code == -1:
		t.Errorf("%s: the worker still ran after 30s", what)
	case code == 0:
		t.Errorf("%s: the worker exited 0", what)
	}
	if elapsed > 10*time.Second {
		t.Errorf("%s: took %s to fail (want a few seconds)", what, elapsed)
	}
	if strings.TrimSpace(out) == "" {
		t.Errorf("%s: nothing on stderr", what)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("%s: stderr prints a secret (%.6s...):\n%s", what, s, out)
		}
	}
}

// Scenario 6: TLS with client certificates, user/password in the URL, an nkey seed, a creds file in operator
// mode, and tenant isolation.
func TestSecurity(t *testing.T) {
	needWorker(t)
	n := scale(600, 5_000)

	t.Run("tls", func(t *testing.T) {
		dir := t.TempDir()
		p := newPKI(t, dir, "good")
		other := newPKI(t, dir, "other")
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.ServerKey, CaFile: p.CA, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
			o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, true, tc, 2
		}))
		url := "tls://127.0.0.1:" + fmt.Sprint(srv.Opts.Port)
		c := NewClient(t, url, nats.RootCAs(p.CA), nats.ClientCert(p.ClientCert, p.ClientKey))
		vars := baseEnv(url)
		vars["DEDUPE_NATS_TLS_CA"], vars["DEDUPE_NATS_TLS_CERT"], vars["DEDUPE_NATS_TLS_KEY"] = p.CA, p.ClientCert, p.ClientKey
		_, r := smallRun(t, c, vars, n, uint64(seed)+61)
		t.Logf("FIGURES scenario=security-tls envelopes=%d ledger=%q", n, r.Summary())

		key, _ := os.ReadFile(p.ClientKey)
		keyBody := strings.Split(string(key), "\n")[1]
		failFast(t, "no client certificate", map[string]string{"DEDUPE_NATS_URL": url, "DEDUPE_SOURCES": StandardSources, "DEDUPE_NATS_TLS_CA": p.CA})
		failFast(t, "client certificate from another CA", map[string]string{"DEDUPE_NATS_URL": url, "DEDUPE_SOURCES": StandardSources,
			"DEDUPE_NATS_TLS_CA": p.CA, "DEDUPE_NATS_TLS_CERT": other.ClientCert, "DEDUPE_NATS_TLS_KEY": other.ClientKey}, keyBody)
		failFast(t, "server not trusted", map[string]string{"DEDUPE_NATS_URL": url, "DEDUPE_SOURCES": StandardSources,
			"DEDUPE_NATS_TLS_CA": other.CA, "DEDUPE_NATS_TLS_CERT": p.ClientCert, "DEDUPE_NATS_TLS_KEY": p.ClientKey}, keyBody)
	})

	t.Run("user-password", func(t *testing.T) {
		pass := "pw-" + randToken()
		srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
			o.Users = []*server.User{{Username: "dedupe", Password: pass}}
		}))
		url := fmt.Sprintf("nats://dedupe:%s@127.0.0.1:%d", pass, srv.Opts.Port)
		c := NewClient(t, url)
		w, r := smallRun(t, c, baseEnv(url), n, uint64(seed)+62)
		t.Logf("FIGURES scenario=security-userpass envelopes=%d ledger=%q", n, r.Summary())
		if strings.Contains(w.Log(), pass) {
			t.Errorf("the running worker's log prints the password")
		}
		wrong := "wrong-" + randToken()
		failFast(t, "wrong password", map[string]string{"DEDUPE_SOURCES": StandardSources,
			"DEDUPE_NATS_URL": fmt.Sprintf("nats://dedupe:%s@127.0.0.1:%d", wrong, srv.Opts.Port)}, wrong, pass)
		failFast(t, "no password", map[string]string{"DEDUPE_SOURCES": StandardSources, "DEDUPE_NATS_URL": srv.URL()})
	})

	t.Run("nkey", func(t *testing.T) {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		seedB, _ := kp.Seed()
		srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
			o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
		}))
		dir := t.TempDir()
		seedFile := filepath.Join(dir, "user.nk")
		if err := os.WriteFile(seedFile, seedB, 0o600); err != nil {
			t.Fatal(err)
		}
		opt, err := nats.NkeyOptionFromSeed(seedFile)
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(t, srv.URL(), opt)
		vars := baseEnv(srv.URL())
		vars["DEDUPE_NATS_NKEY_SEED_FILE"] = seedFile
		w, r := smallRun(t, c, vars, n, uint64(seed)+63)
		t.Logf("FIGURES scenario=security-nkey envelopes=%d ledger=%q", n, r.Summary())
		if strings.Contains(w.Log(), string(seedB)) {
			t.Errorf("the running worker's log prints the seed")
		}
		otherKP, _ := nkeys.CreateUser()
		otherSeed, _ := otherKP.Seed()
		otherFile := filepath.Join(dir, "other.nk")
		_ = os.WriteFile(otherFile, otherSeed, 0o600)
		failFast(t, "unknown nkey", map[string]string{"DEDUPE_SOURCES": StandardSources, "DEDUPE_NATS_URL": srv.URL(),
			"DEDUPE_NATS_NKEY_SEED_FILE": otherFile}, string(otherSeed), string(seedB))
		garbled := append([]byte(nil), seedB...)
		garbled[10] ^= 0x01 // a checksum error
		garbledFile := filepath.Join(dir, "garbled.nk")
		_ = os.WriteFile(garbledFile, garbled, 0o600)
		failFast(t, "garbled seed file", map[string]string{"DEDUPE_SOURCES": StandardSources, "DEDUPE_NATS_URL": srv.URL(),
			"DEDUPE_NATS_NKEY_SEED_FILE": garbledFile}, string(garbled), string(seedB))
	})

	// The worker's user has exactly the permissions documented in deploy/nats-permissions.yaml (what the
	// Secret's comment tells operators to grant); the harness has a user of its own, without limits.
	t.Run("creds-operator-mode", func(t *testing.T) {
		perms := documentedPermissions(t)
		t.Logf("worker's permissions (%s): publish %v, subscribe %v", permissionsFile, perms.Publish, perms.Subscribe)
		op := newOperator(t)
		acc := op.account(t, "DEDUPE", true)
		srv := natstest.Run(t, natstest.WithOptions(op.configure))
		dir := t.TempDir()
		creds, userSeed := acc.userWith(t, dir, "worker", &perms)
		harness, _ := acc.user(t, dir, "harness")
		c := NewClient(t, srv.URL(), nats.UserCredentials(harness))
		vars := baseEnv(srv.URL())
		vars["DEDUPE_NATS_CREDS"] = creds
		w, r := smallRun(t, c, vars, n, uint64(seed)+64)
		t.Logf("FIGURES scenario=security-creds envelopes=%d ledger=%q", n, r.Summary())
		checkNoPermissionErrors(t, w)
		if strings.Contains(w.Log(), userSeed) {
			t.Errorf("the running worker's log prints the user seed")
		}
		// A user of an account the server does not know (signed by another operator).
		stranger := newOperator(t).account(t, "STRANGER", true)
		badCreds, badSeed := stranger.user(t, dir, "stranger")
		failFast(t, "creds of an unknown account", map[string]string{"DEDUPE_SOURCES": StandardSources, "DEDUPE_NATS_URL": srv.URL(),
			"DEDUPE_NATS_CREDS": badCreds}, badSeed, userSeed)
	})

	// The narrower variant the file documents: "$JS.API.>" replaced by the API subjects the worker uses. The
	// worker provisions everything on this fresh server, so the creation subjects are exercised too, and the
	// window commands run with the same user.
	t.Run("documented-permissions-narrow", func(t *testing.T) {
		perms := documentedPermissions(t).narrow(t)
		t.Logf("worker's permissions (%s, narrow): publish %v, subscribe %v", permissionsFile, perms.Publish, perms.Subscribe)
		op := newOperator(t)
		acc := op.account(t, "DEDUPE", true)
		srv := natstest.Run(t, natstest.WithOptions(op.configure))
		dir := t.TempDir()
		creds, _ := acc.userWith(t, dir, "worker", &perms)
		harness, _ := acc.user(t, dir, "harness")
		c := NewClient(t, srv.URL(), nats.UserCredentials(harness))
		vars := baseEnv(srv.URL())
		vars["DEDUPE_NATS_CREDS"] = creds
		w, r := smallRun(t, c, vars, n, uint64(seed)+65)
		t.Logf("FIGURES scenario=security-creds-narrow envelopes=%d ledger=%q", n, r.Summary())
		checkNoPermissionErrors(t, w)
		for _, args := range [][]string{
			{"window", "get", "--tenant", "acme", "--source", "gh", "--key", "no-such-delivery"},
			{"window", "forget", "--tenant", "acme", "--source", "gh", "--key", "no-such-delivery"},
		} {
			out, err := runCommand(vars, args...)
			t.Logf("dedupeworker %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
			if err != nil {
				t.Errorf("dedupeworker %s with the narrow permissions: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})

	// A user without publish on $JS.ACK.> (the list the Secret documented before): the server refuses every ack
	// asynchronously, so the envelopes are processed but redelivered for ever. The worker must count the refusals
	// (dedupeworker_ack_failures_total{reason="refused"}) and report not ready.
	t.Run("permissions-without-ack", func(t *testing.T) {
		perms := documentedPermissions(t).without(t, "$JS.ACK.>")
		op := newOperator(t)
		acc := op.account(t, "DEDUPE", true)
		srv := natstest.Run(t, natstest.WithOptions(op.configure))
		dir := t.TempDir()
		creds, _ := acc.userWith(t, dir, "worker", &perms)
		harness, _ := acc.user(t, dir, "harness")
		c := NewClient(t, srv.URL(), nats.UserCredentials(harness))
		vars := baseEnv(srv.URL())
		vars["DEDUPE_NATS_CREDS"] = creds
		vars["DEDUPE_ACK_WAIT"] = "2s" // refused acks come back quickly as redeliveries
		w := StartWorkers(t, 1, vars)[0]
		refused := func() float64 {
			m, err := w.Metrics()
			if err != nil {
				return -1
			}
			return SumMetric(m, "dedupeworker_ack_failures_total", "reason")["refused"]
		}
		publishAll(t, c, Mixed(MixOptions{N: 50, Tenants: []string{"acme"}, DupFrac: 0.2, Seed: uint64(seed) + 66}))
		var first float64
		poll(t, 30*time.Second, func() (bool, string) {
			first = refused()
			return first > 0, fmt.Sprintf(`dedupeworker_ack_failures_total{reason="refused"} = %v`, first)
		})
		// More envelopes, and the redeliveries of the first ones: the count keeps growing.
		publishAll(t, c, Mixed(MixOptions{N: 50, Tenants: []string{"globex"}, DupFrac: 0.2, Seed: uint64(seed) + 67}))
		poll(t, 30*time.Second, func() (bool, string) {
			v := refused()
			return v > first, fmt.Sprintf(`dedupeworker_ack_failures_total{reason="refused"} = %v, was %v`, v, first)
		})
		poll(t, 30*time.Second, func() (bool, string) {
			code, body, err := w.get("/readyz")
			if err != nil {
				return false, err.Error()
			}
			return code == http.StatusServiceUnavailable, fmt.Sprintf("/readyz %d %s", code, strings.TrimSpace(body))
		})
		// /readyz computes readiness when asked; the gauge is set just after the failure that readiness reports,
		// and a status poll's update can overwrite it with what it computed a moment before: poll the gauge too.
		if !within(30*time.Second, func() bool {
			m, err := w.Metrics()
			return err == nil && m["dedupeworker_ready"] == 0
		}) {
			if m, err := w.Metrics(); err == nil {
				t.Errorf("dedupeworker_ready = %v while every ack is refused, want 0", m["dedupeworker_ready"])
			}
		}
		if m, err := w.Metrics(); err == nil {
			t.Logf("ack failures %v, ready %v", SumMetric(m, "dedupeworker_ack_failures_total", "reason"), m["dedupeworker_ready"])
		}
		// Nothing was acknowledged, so everything is still pending on the consumer.
		if p, err := c.Progress(context.Background()); err == nil {
			t.Logf("progress: %s", p)
			if p.Pending == 0 {
				t.Errorf("the consumer has nothing pending although every ack was refused: %s", p)
			}
		}
	})

	t.Run("tenants", func(t *testing.T) { tenantIsolation(t) })
}

// permissionsFile is the documented list of the NATS permissions of the worker's user.
const permissionsFile = "../deploy/nats-permissions.yaml"

// natsPermissions is permissionsFile: what the worker's user may publish and subscribe to, and the narrower
// alternative to "$JS.API.>".
type natsPermissions struct {
	Publish      []string `yaml:"publish"`
	Subscribe    []string `yaml:"subscribe"`
	JetStreamAPI []string `yaml:"jetstream_api"`
}

func documentedPermissions(t *testing.T) natsPermissions {
	t.Helper()
	f, err := os.Open(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p natsPermissions
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", permissionsFile, err)
	}
	if len(p.Publish) == 0 || len(p.Subscribe) == 0 {
		t.Fatalf("%s: empty publish or subscribe list: %+v", permissionsFile, p)
	}
	return p
}

// narrow is p with "$JS.API.>" replaced by the API subjects of jetstream_api.
func (p natsPermissions) narrow(t *testing.T) natsPermissions {
	t.Helper()
	i := slices.Index(p.Publish, "$JS.API.>")
	if i < 0 || len(p.JetStreamAPI) == 0 {
		t.Fatalf("%s: no $JS.API.> in publish, or no jetstream_api list to narrow it to", permissionsFile)
	}
	p.Publish = slices.Concat(p.Publish[:i:i], p.JetStreamAPI, p.Publish[i+1:])
	return p
}

// without is p less one publish subject.
func (p natsPermissions) without(t *testing.T, subject string) natsPermissions {
	t.Helper()
	i := slices.Index(p.Publish, subject)
	if i < 0 {
		t.Fatalf("%s: publish has no %s", permissionsFile, subject)
	}
	p.Publish = slices.Delete(slices.Clone(p.Publish), i, i+1)
	return p
}

// checkNoPermissionErrors fails the test when the worker's log reports a permissions violation: a subject the
// documented permissions do not cover (its ledger may still balance, for instance when only acks are refused).
func checkNoPermissionErrors(t *testing.T, w *Worker) {
	t.Helper()
	for _, line := range strings.Split(w.Log(), "\n") {
		if strings.Contains(strings.ToLower(line), "permissions violation") {
			t.Errorf("worker %s: %s", w.Name, excerpt(line, 600))
		}
	}
	if m, err := w.Metrics(); err == nil {
		for reason, v := range SumMetric(m, "dedupeworker_ack_failures_total", "reason") {
			if v > 0 {
				t.Errorf("worker %s: dedupeworker_ack_failures_total{reason=%q} = %v", w.Name, reason, v)
			}
		}
	}
}

// runCommand runs another subcommand of the worker binary with the given DEDUPE_* variables.
func runCommand(vars map[string]string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, workerBin, args...)
	cmd.Env = workerEnv(vars)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func randToken() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	for i := range b {
		b[i] = alphabet[mrand.IntN(len(alphabet))]
	}
	return string(b)
}

// operator is an operator-mode trust chain: operator → system account and accounts → users.
type operator struct {
	kp     nkeys.KeyPair
	claims *jwt.OperatorClaims
	sysPub string
	jwts   map[string]string // account public key → JWT
}

type account struct {
	kp  nkeys.KeyPair
	pub string
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	kp, _ := nkeys.CreateOperator()
	pub, _ := kp.PublicKey()
	o := &operator{kp: kp, claims: jwt.NewOperatorClaims(pub), jwts: map[string]string{}}
	o.claims.Name = "test-operator"
	sys := o.account(t, "SYS", false)
	o.sysPub = sys.pub
	o.claims.SystemAccount = sys.pub
	// Self-signed operator JWT (the server wants it signed, as `nsc` does).
	if _, err := o.claims.Encode(kp); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *operator) account(t *testing.T, name string, jetStream bool) *account {
	t.Helper()
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	if jetStream {
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1,
			MemoryMaxStreamBytes: -1, DiskMaxStreamBytes: -1}
	}
	tok, err := ac.Encode(o.kp)
	if err != nil {
		t.Fatal(err)
	}
	o.jwts[pub] = tok
	return &account{kp: kp, pub: pub}
}

// configure puts the server in operator mode with a memory resolver preloaded with every account.
func (o *operator) configure(opts *server.Options) {
	res := &server.MemAccResolver{}
	for pub, tok := range o.jwts {
		_ = res.Store(pub, tok)
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{o.claims}
	opts.AccountResolver = res
	opts.SystemAccount = o.sysPub
}

// user writes a creds file for a new user of the account (no permission limits) and returns its path and the
// user's seed.
func (a *account) user(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	return a.userWith(t, dir, name, nil)
}

// userWith is user whose JWT allows only perms (nil: no limits).
func (a *account) userWith(t *testing.T, dir, name string, perms *natsPermissions) (string, string) {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seedB, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	if perms != nil {
		uc.Pub.Allow.Add(perms.Publish...)
		uc.Sub.Allow.Add(perms.Subscribe...)
	}
	tok, err := uc.Encode(a.kp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(tok, seedB)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, string(seedB)
}

// tenantIsolation: the same event key under two tenants is two events, published one tenant after the other so
// that the second tenant's claims meet the first tenant's; keys that look like subjects, separators or other
// tenants' keys stay in their tenant.
func tenantIsolation(t *testing.T) {
	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	StartWorkers(t, 1, baseEnv(srv.URL()))
	odd := []string{"evt-1", "a.b", "*", ">", "a b", ":", "acme:gh:evt-1", "globex.gh.evt-1", "$KV.dedupe-window.acme.gh",
		"é", strings.Repeat("k", 49), strings.Repeat("L", 201), "sha256:" + strings.Repeat("0", 64), "=", "==", "a/b", "..."}
	build := func(tenant string) []*Envelope {
		var envs []*Envelope
		for i, k := range odd {
			h := nats.Header{}
			h.Set("X-GitHub-Delivery", k)
			envs = append(envs, newEnvelope("ingest."+tenant+".gh", h, []byte(`{}`)))
			body := []byte(fmt.Sprintf(`{"id":%q,"data":{"order":{"id":%q}}}`, k, k))
			envs = append(envs, newEnvelope("ingest."+tenant+".orders", nil, body), newEnvelope("ingest."+tenant+".stripe", nil, body))
			form := []byte(fmt.Sprintf(`{"form":%d}`, i))
			envs = append(envs, newEnvelope("ingest."+tenant+".forms", nil, form))
			// and a retry of each, which is a duplicate within the tenant
			envs = append(envs, newEnvelope("ingest."+tenant+".gh", h, []byte(`{"retry":true}`)))
		}
		return envs
	}
	var all []*Envelope
	tenants := []string{"acme", "globex", "acme-globex", "acme_gh"}
	for _, tenant := range tenants {
		envs := build(tenant)
		publishAll(t, c, envs)
		all = append(all, envs...)
		c.WaitQuiet(t, uint64(len(all)), time.Minute)
	}
	r := c.Ledger(t, all, nil)
	per := r.WantUnique / len(tenants)
	if r.WantUnique != per*len(tenants) || r.Unique != r.WantUnique {
		t.Errorf("want %d events per tenant, ledger: %s", per, r.Summary())
	}
	kv, err := c.JS.KeyValue(context.Background(), "dedupe-window")
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		lister, err := kv.ListKeysFiltered(context.Background(), tenant+".>")
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for range lister.Keys() {
			got++
		}
		if got != per {
			t.Errorf("window: tenant %s holds %d claims, want %d", tenant, got, per)
		}
	}
	t.Logf("FIGURES scenario=tenants tenants=%d envelopes=%d events_per_tenant=%d ledger=%q", len(tenants), len(all), per, r.Summary())
}
