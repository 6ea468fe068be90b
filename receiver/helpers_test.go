package receiver_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// The tests' own signers, written from the providers' documentation (receiver/verify pins its own to the
// providers' published vectors).

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func githubSig(secret, body string) string {
	return "sha256=" + hex.EncodeToString(mac([]byte(secret), body))
}

func stripeSig(secret string, ts time.Time, body string) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac([]byte(secret), t+".", body))
}

func shopifySig(secret, body string) string {
	return base64.StdEncoding.EncodeToString(mac([]byte(secret), body))
}

func standardSig(secret, id string, ts time.Time, body string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id+"."+strconv.FormatInt(ts.Unix(), 10)+".", body))
}

func hmacHex(secret, body string) string { return hex.EncodeToString(mac([]byte(secret), body)) }

// Secrets of the test sources. Distinctive, so that a test can search logs and errors for them.
const (
	ghOld       = "gh-secret-OLD-7f3a"
	ghNew       = "gh-secret-NEW-91c2"
	stAcme      = "whsec_stripe-ACME-55e0"
	shopSecret  = "shop-secret-SHOP-0d4b"
	hmacSecret  = "hmac-secret-HMAC-a9e1"
	swSecretB64 = "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LTQ0YjA=" // base64 of "standard-webhooks-key-44b0"
)

var allSecrets = []string{ghOld, ghNew, stAcme, shopSecret, hmacSecret, swSecretB64, "c3RhbmRhcmQtd2ViaG9va3Mta2V5LTQ0YjA="}

// testSources declares one source per scheme: gh (github, reject), st (stripe, forward, secrets for tenant acme
// only), open (none), shop (shopify), sw (standard webhooks), sig (hmac).
const testSources = `sources:
  gh:   {dedupe: github, verify: github}
  st:   {dedupe: stripe, verify: stripe, on_invalid: forward}
  open: {dedupe: {header: X-Id}, verify: none}
  shop: {dedupe: shopify, verify: shopify}
  sw:   {dedupe: standard_webhooks, verify: standard_webhooks}
  sig:  {dedupe: {header: X-Id}, verify: {scheme: hmac, header: X-Sig}}
`

// testEnviron and testSecretsDir give the test sources their secrets: environment variables for every tenant, a
// file for stripe's tenant acme.
func testEnviron() []string {
	return []string{
		"PATH=/bin",
		"DEDUPE_INGEST_SECRET_GH=" + ghOld + "," + ghNew,
		"DEDUPE_INGEST_SECRET_SHOP=" + shopSecret,
		"DEDUPE_INGEST_SECRET_SW=" + swSecretB64,
		"DEDUPE_INGEST_SECRET_SIG=" + hmacSecret,
	}
}

func testSecretsDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	writeFile(tb, filepath.Join(dir, "acme.st"), stAcme+"\n")
	return dir
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func mustSources(tb testing.TB, doc string) keys.Sources {
	tb.Helper()
	src, err := keys.LoadSources([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	return src
}

// testPolicy is the policy of testSources with their secrets.
func testPolicy(tb testing.TB) *receiver.Policy {
	tb.Helper()
	src := mustSources(tb, testSources)
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: testSecretsDir(tb), Environ: testEnviron(), Sources: src.IDs()})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// jsEnv is a real nats-server with JetStream and, unless noStream, the input stream INGEST on ingest.>.
type jsEnv struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startJS(tb testing.TB, withStream bool) *jsEnv {
	tb.Helper()
	srv := natstest.Run(tb)
	nc := natstest.Connect(tb, srv.URL(), nats.ReconnectBufSize(-1))
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	e := &jsEnv{srv: srv, nc: nc, js: js}
	if withStream {
		e.createStream(tb, "INGEST", "ingest.>")
	}
	return e
}

func (e *jsEnv) createStream(tb testing.TB, name, subject string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		tb.Fatal(err)
	}
}

// lastSeq is INGEST's last sequence (0 when empty).
func (e *jsEnv) lastSeq(tb testing.TB) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, "INGEST")
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.LastSeq
}

func (e *jsEnv) msg(tb testing.TB, seq uint64) *jetstream.RawStreamMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, "INGEST")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		tb.Fatalf("INGEST seq %d: %v", seq, err)
	}
	return m
}

// newReceiver builds a Receiver on e with the test policy, its metrics on their own registry (served on /metrics)
// and its log in the returned buffer.
func newReceiver(tb testing.TB, e *jsEnv, p *receiver.Policy, mods ...func(*receiver.Config)) (*receiver.Receiver, *natstest.Buffer) {
	tb.Helper()
	logs := &natstest.Buffer{}
	reg := prometheus.NewRegistry()
	cfg := receiver.Config{
		JetStream: e.js,
		Policy:    p,
		Logger:    newJSONLogger(logs),
		Metrics:   receiver.NewMetrics(reg),
		Gatherer:  reg,
	}
	for _, m := range mods {
		m(&cfg)
	}
	r, err := receiver.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r, logs
}

// do sends one request straight to the handler.
func do(h http.Handler, method, path string, hdr http.Header, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// hdr builds headers through Add, as net/http delivers them (canonical names).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// metricsText is what the receiver serves on /metrics.
func metricsText(tb testing.TB, h http.Handler) string {
	tb.Helper()
	rec := do(h, http.MethodGet, "/metrics", nil, "")
	if rec.Code != http.StatusOK {
		tb.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// metricValue reads one sample from the text exposition: name{labels} value; -1 when absent.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func requests(source, outcome string) string {
	return fmt.Sprintf(`dedupeworker_ingest_requests_total{outcome=%q,source=%q}`, outcome, source)
}

// noSecretIn fails when text contains any of the test secrets.
func noSecretIn(tb testing.TB, what, text string, secrets ...string) {
	tb.Helper()
	if len(secrets) == 0 {
		secrets = allSecrets
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			tb.Fatalf("%s shows a secret (%d bytes):\n%s", what, len(s), text)
		}
	}
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
