package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// TestGitHubSignature checks the signing helper against GitHub's documented test vector, and against the
// receiver's own verifier (receiver/verify), which must accept what the bench signs and refuse a changed body.
func TestGitHubSignature(t *testing.T) {
	const secret, body = "It's a Secret to Everybody", "Hello, World!"
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := githubSignature(secret, []byte(body)); got != want {
		t.Fatalf("githubSignature = %s, want %s (GitHub's docs)", got, want)
	}
	v, err := verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", githubSignature(secret, []byte(body)))
	if err := v.Verify(h, []byte(body)); err != nil {
		t.Fatalf("receiver/verify refuses the bench's signature: %v", err)
	}
	if err := v.Verify(h, []byte(body+" ")); !errors.Is(err, verify.ErrMismatch) {
		t.Fatalf("a changed body: %v, want a mismatch", err)
	}

	// Every request the bench builds verifies under the receiver's secret, headers as sent.
	bv, err := verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{ingestSecret}})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorkload(WorkloadConfig{N: 300, Seed: 7}, GeneratedCorpus(7, 16))
	if got := len(ingestRequests(w, 120, ingestSecret)); got != 120 {
		t.Fatalf("120 requests: %d built", got)
	}
	reqs := ingestRequests(w, 450, ingestSecret) // more than the workload: requests cycle through its 300 envelopes
	if len(reqs) != 300 {
		t.Fatalf("450 requests of a 300-envelope workload: %d built, want 300", len(reqs))
	}
	for i := range reqs {
		rq := &reqs[i]
		if err := bv.Verify(rq.httpHeader(deliveryID(1, i)), rq.body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if !bytes.Equal(rq.body, w.Body(i%300)) || rq.tenant != w.Events[w.Envelopes[i%300].Event].Tenant {
			t.Fatalf("request %d is not envelope %d's tenant and body", i, i%300)
		}
		if rq.subject() != "ingest."+rq.tenant+".github" || rq.path() != "/hooks/"+rq.tenant+"/github" {
			t.Fatalf("request %d: subject %s, path %s", i, rq.subject(), rq.path())
		}
	}
}

func TestDeliveryID(t *testing.T) {
	guid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, run := range []uint32{1, 2, 0xffffffff} {
		for _, i := range []int{0, 1, 4999, 1 << 40} {
			id := deliveryID(run, i)
			if !guid.MatchString(id) {
				t.Errorf("deliveryID(%d, %d) = %q: not GUID-shaped", run, i, id)
			}
			if seen[id] {
				t.Errorf("deliveryID(%d, %d) = %q twice", run, i, id)
			}
			seen[id] = true
			h := nats.Header{}
			h.Set("X-GitHub-Delivery", id)
			h.Set("X-Hub-Signature-256", "sha256=00")
			h.Set(contract.HeaderVerified, "true")
			if p := checkEnvelope("ingest.tenant-1.github", h, run); p != "" {
				t.Errorf("checkEnvelope of run %d: %s", run, p)
			}
			if p := checkEnvelope("ingest.tenant-1.github", h, run+1); !strings.Contains(p, "not of this run") {
				t.Errorf("checkEnvelope of another run: %q", p)
			}
		}
	}
	h := nats.Header{"X-Github-Delivery": {deliveryID(3, 0)}, "Ingest-Verified": {"true", "true"}}
	if p := checkEnvelope("ingest.t.gh", h, 3); !strings.Contains(p, "subject ingest.t.gh") || !strings.Contains(p, "Ingest-Verified") ||
		!strings.Contains(p, "no X-Hub-Signature-256") {
		t.Errorf("checkEnvelope of a wrong envelope: %q", p)
	}
}

func TestIngestFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseOptions(nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.ingest || slices.Contains(o.modes, modeIngest) || o.ingestN != ingestDefaultN || o.ingestClients != ingestDefaultClients {
		t.Fatalf("no flags: ingest %v, modes %v, n %d, clients %d", o.ingest, o.modes, o.ingestN, o.ingestClients)
	}
	for _, c := range []struct {
		args       []string
		modes      []string
		n, clients int
	}{
		{[]string{"-quick"}, []string{"drain", "live"}, ingestQuickN, ingestDefaultClients},
		{[]string{"-ingest"}, []string{"drain", "live", "ingest"}, ingestDefaultN, ingestDefaultClients},
		{[]string{"-quick", "-ingest", "-ingest-n", "100", "-ingest-clients", "4"}, []string{"drain", "live", "ingest"}, 100, 4},
		{[]string{"-modes", "ingest"}, []string{"ingest"}, ingestDefaultN, ingestDefaultClients},
		{[]string{"-modes", "ingest", "-ingest", "-quick"}, []string{"ingest"}, ingestQuickN, ingestDefaultClients},
		{[]string{"-modes", "drain", "-ingest"}, []string{"drain", "ingest"}, ingestDefaultN, ingestDefaultClients},
		{[]string{"-scaling", "1,2", "-ingest"}, []string{"drain", "ingest"}, ingestDefaultN, ingestDefaultClients},
		{[]string{"-ingest-clients", "4096", "-ingest-n", "1"}, []string{"drain", "live"}, 1, 4096},
	} {
		stderr.Reset()
		o, err := parseOptions(c.args, &stderr)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, stderr.String())
		}
		if !slices.Equal(o.modes, c.modes) || o.ingestN != c.n || o.ingestClients != c.clients {
			t.Errorf("%v: modes %v, n %d, clients %d; want %v, %d, %d", c.args, o.modes, o.ingestN, o.ingestClients, c.modes, c.n, c.clients)
		}
	}
	for _, bad := range [][]string{
		{"-ingest-n", "0"}, {"-ingest-n", "-5"}, {"-ingest-n", "10000001"}, {"-ingest-n", "many"},
		{"-ingest-clients", "0"}, {"-ingest-clients", "4097"}, {"-modes", "ingest,receive"},
	} {
		stderr.Reset()
		if _, err := parseOptions(bad, &stderr); !errors.Is(err, errUsage) {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
		if !strings.Contains(stderr.String(), bad[0]) {
			t.Errorf("%v: the message should name the flag:\n%s", bad, stderr.String())
		}
	}
	stderr.Reset()
	if _, err := parseOptions([]string{"-h"}, &stderr); err == nil || !strings.Contains(stderr.String(), "-ingest-clients") {
		t.Errorf("help lacks the ingest flags:\n%s", stderr.String())
	}
}

// TestRunLoad: every request is made exactly once, never more than c at a time, and failures are counted by kind.
func TestRunLoad(t *testing.T) {
	const n, c = 1000, 7
	calls := make([]atomic.Int32, n)
	var inFlight, peak atomic.Int32
	l := runLoad(context.Background(), n, c, func(_ context.Context, i int) string {
		cur := inFlight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		calls[i].Add(1)
		time.Sleep(10 * time.Microsecond)
		inFlight.Add(-1)
		if i%100 == 3 {
			return "503 Service Unavailable"
		}
		return ""
	})
	for i := range calls {
		if v := calls[i].Load(); v != 1 {
			t.Fatalf("request %d made %d times", i, v)
		}
	}
	if p := peak.Load(); p > c {
		t.Errorf("%d requests at once, want at most %d", p, c)
	}
	if len(l.lat) != n || l.ok != n-10 || l.errors["503 Service Unavailable"] != 10 || len(l.errors) != 1 || l.elapsed <= 0 {
		t.Errorf("load: %d latencies, %d ok, errors %v, elapsed %s", len(l.lat), l.ok, l.errors, l.elapsed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if l := runLoad(ctx, n, c, func(context.Context, int) string { return "" }); len(l.lat) != 0 {
		t.Errorf("a cancelled load made %d requests", len(l.lat))
	}
}

// TestIngestEndToEnd drives both sides against a real nats-server: the receiver side through the receiver package
// built from exactly the settings ingestEnv gives the ingest process (read by config.Load, keys.LoadSources and
// receiver.LoadSecrets as `dedupeworker ingest` reads them), over HTTP with the bench's client; the direct side with
// the bench's publishes. Every request is answered 202, INGEST holds each run's envelopes, verified, and the two
// sides store envelopes of the same size.
func TestIngestEndToEnd(t *testing.T) {
	srv := natstest.Run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, js, err := connect(srv.URL(), "ingest-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := createInput(ctx, js, 0, retainWorkQueue); err != nil {
		t.Fatal(err)
	}

	const clients = 300 // above the receiver's default in-flight bound: ingestEnv raises it
	env := ingestEnv(srv.URL(), 18080, clients)
	var ours []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "DEDUPE_") {
			ours = append(ours, kv)
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
	}
	for _, want := range []string{"DEDUPE_NATS_URL=" + srv.URL(), "DEDUPE_INGEST_ADDR=127.0.0.1:18080", "DEDUPE_HTTP_ADDR=",
		"DEDUPE_INGEST_SECRET_GITHUB=" + ingestSecret, "DEDUPE_INGEST_MAX_IN_FLIGHT=300"} {
		if !slices.Contains(ours, want) {
			t.Errorf("ingest environment lacks %s: %q", want, ours)
		}
	}
	if slices.ContainsFunc(ingestEnv(srv.URL(), 1, 32), func(kv string) bool { return strings.HasPrefix(kv, "DEDUPE_INGEST_MAX_IN_FLIGHT=") }) {
		t.Error("32 clients: DEDUPE_INGEST_MAX_IN_FLIGHT set, want the default")
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("the ingest settings do not load: %v", err)
	}
	if cfg.IngestAddr != "127.0.0.1:18080" || cfg.HTTPAddr != "" || cfg.IngestMaxInFlight != clients || cfg.InputStream != inputStream || cfg.InputPrefix != "ingest" {
		t.Fatalf("loaded settings: ingest addr %q, http addr %q, max in flight %d, stream %s, prefix %s",
			cfg.IngestAddr, cfg.HTTPAddr, cfg.IngestMaxInFlight, cfg.InputStream, cfg.InputPrefix)
	}
	src, err := keys.LoadSources([]byte(cfg.Sources))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: env, Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := receiver.New(receiver.Config{JetStream: js, Policy: policy, InputStream: cfg.InputStream, InputPrefix: cfg.InputPrefix,
		MaxInFlight: cfg.IngestMaxInFlight})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(rcv)
	defer hs.Close()

	w := NewWorkload(WorkloadConfig{N: 250, Seed: 5}, GeneratedCorpus(5, 16))
	const n = 400 // more than the workload: requests cycle
	reqs := ingestRequests(w, n, ingestSecret)
	var dials atomic.Int64
	hc := ingestHTTPClient(16, &dials) // as the bench: one connection at most per concurrent client
	defer hc.CloseIdleConnections()
	dnc, djs, err := connect(srv.URL(), "ingest-test-direct")
	if err != nil {
		t.Fatal(err)
	}
	defer dnc.Close()

	bareSrv := httptest.NewServer(bareHandler{js: djs})
	defer bareSrv.Close()

	var runs []*ingestRun
	for run, side := range []string{sideReceiver, sideDirect, sideReceiver, sideBare} {
		run := uint32(run + 1)
		base := hs.URL
		if side == sideBare {
			base = bareSrv.URL
		}
		do := func(ctx context.Context, i int) string {
			return postSigned(ctx, hc, base, &reqs[i%len(reqs)], deliveryID(run, i))
		}
		if side == sideDirect {
			do = func(ctx context.Context, i int) string {
				return publishDirect(ctx, djs, &reqs[i%len(reqs)], deliveryID(run, i))
			}
		}
		l := runLoad(ctx, n, 16, do)
		r := &ingestRun{side: side, requests: n, seconds: l.elapsed.Seconds(), lat: summarizeLatency(l.lat), accepted: l.ok, errors: l.errors}
		if err := checkIngested(ctx, js, r, run); err != nil {
			t.Fatal(err)
		}
		if p := r.problem(); p != "" || r.accepted != n || r.stored != n {
			t.Fatalf("%s run %d: %s (accepted %d, stored %d)", side, run, p, r.accepted, r.stored)
		}
		runs = append(runs, r)
	}
	if left, _ := streamMsgs(ctx, js, inputStream); left != 0 {
		t.Errorf("%d envelopes left after the purge", left)
	}
	if d := dials.Load(); d < 2 || d > 32 {
		t.Errorf("%d connections opened by 16 keep-alive clients to two servers", d)
	}
	if runs[0].storedBytes != runs[1].storedBytes || runs[1].storedBytes != runs[2].storedBytes || runs[2].storedBytes != runs[3].storedBytes {
		t.Errorf("stored bytes: receiver %d, direct %d, receiver %d, bare %d: the direct and bare sides should store what the receiver stores",
			runs[0].storedBytes, runs[1].storedBytes, runs[2].storedBytes, runs[3].storedBytes)
	}

	// A request signed with another secret is refused (401), and the check reports it.
	bad := ingestRequests(w, 1, "not the secret")
	if got := postSigned(ctx, hc, hs.URL, &bad[0], deliveryID(9, 0)); got != "401 Unauthorized" {
		t.Errorf("a wrongly signed request: %q, want 401 Unauthorized", got)
	}
	r := &ingestRun{requests: 1, errors: map[string]int{"401 Unauthorized": 1}}
	if err := checkIngested(ctx, js, r, 9); err != nil {
		t.Fatal(err)
	}
	if p := r.problem(); !strings.Contains(p, "1 of 1 requests failed (401 Unauthorized ×1)") || !strings.Contains(p, "holds 0 envelopes after the run, expected 1") {
		t.Errorf("problem of a refused request: %q", p)
	}
}
