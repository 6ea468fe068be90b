package deploy_test

// The NATS permissions of the receiver's user: the ingest section of nats-permissions.yaml, a second YAML document
// after the worker's (so that the worker's readers, which decode the first document strictly, are unchanged).

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// ingestPermissions is the ingest section: what the receiver's user may publish and subscribe to.
type ingestPermissions struct {
	Publish   []string `yaml:"publish"`
	Subscribe []string `yaml:"subscribe"`
}

// loadIngestPermissions reads the document of permissionsFile that holds the ingest section, strictly.
func loadIngestPermissions(t *testing.T) ingestPermissions {
	t.Helper()
	data, err := os.ReadFile(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: document %d: %v", permissionsFile, i, err)
		}
		var head map[string]yaml.Node
		if err := n.Decode(&head); err != nil {
			continue
		}
		if _, ok := head["ingest"]; !ok {
			continue
		}
		if i == 0 {
			t.Fatalf("%s: the ingest section is in the worker's document: readers of the worker's lists refuse unknown fields", permissionsFile)
		}
		var doc struct {
			Ingest ingestPermissions `yaml:"ingest"`
		}
		raw, _ := yaml.Marshal(&n)
		strict := yaml.NewDecoder(bytes.NewReader(raw))
		strict.KnownFields(true)
		if err := strict.Decode(&doc); err != nil {
			t.Fatalf("%s: document %d: %v", permissionsFile, i, err)
		}
		return doc.Ingest
	}
	t.Fatalf("%s: no ingest section (the receiver's user)", permissionsFile)
	return ingestPermissions{}
}

// TestNATSPermissionsIngest: the receiver's user may publish envelopes under the input prefix and look up the input
// stream, and subscribe to its replies: exactly that, with the default settings. The nsc example says the same.
func TestNATSPermissionsIngest(t *testing.T) {
	p := loadIngestPermissions(t)
	cfg := defaultConfig(t)
	replay := cfg.Bucket + "-replay" // the replay guard's bucket
	wantPub := []string{
		cfg.InputPrefix + ".>",                   // envelopes: <prefix>.<tenant>.<source>
		"$JS.API.STREAM.INFO." + cfg.InputStream, // the stream's lookup: at start and for /readyz
		"$KV." + replay + ".>",                   // the guard's claims
		"$JS.API.INFO",                           // account info, before the bucket is created
		"$JS.API.STREAM.INFO.KV_" + replay,
		"$JS.API.STREAM.INFO.KV_" + replay + "-00",
		"$JS.API.STREAM.CREATE.KV_" + replay,
		"$JS.API.STREAM.MSG.GET.KV_" + replay,
	}
	wantSub := []string{"_INBOX.>"} // publish acknowledgements and API answers
	for what, lists := range map[string][2][]string{"publish": {p.Publish, wantPub}, "subscribe": {p.Subscribe, wantSub}} {
		got, want := slices.Sorted(slices.Values(lists[0])), slices.Sorted(slices.Values(lists[1]))
		for _, s := range got {
			if !validPermSubject(s) {
				t.Errorf("%s: ingest.%s: %q is not a subject", permissionsFile, what, s)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: ingest.%s = %v, want exactly %v: what the receiver uses, and nothing more", permissionsFile, what, lists[0], lists[1])
		}
	}

	// The nsc example of the ingest document.
	data, err := os.ReadFile(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	_, second, ok := strings.Cut(string(data), "\n---\n")
	if !ok {
		t.Fatalf("%s: no second document", permissionsFile)
	}
	header := commentLines(second)
	for flag, want := range map[string][]string{"--allow-pub": p.Publish, "--allow-sub": p.Subscribe} {
		m := regexp.MustCompile(regexp.QuoteMeta(flag) + `\s+'([^']*)'`).FindStringSubmatch(header)
		if m == nil {
			t.Errorf("%s: the ingest nsc example has no %s", permissionsFile, flag)
		} else if got := strings.Split(m[1], ","); !slices.Equal(got, want) {
			t.Errorf("%s: ingest nsc example %s %v, but the list says %v", permissionsFile, flag, got, want)
		}
	}
}

// TestNATSPermissionsIngestSuffice runs the receiver against a NATS server whose user has exactly the ingest
// permissions: it gets ready, and a delivery is stored in the input stream and answered 202. A subject outside
// them is refused, so the server does enforce them.
func TestNATSPermissionsIngestSuffice(t *testing.T) {
	p := loadIngestPermissions(t)
	cfg := defaultConfig(t)
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "admin", Password: "admin"},
			{Username: "ingest", Password: "ingest", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: p.Publish},
				Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	// The worker creates the input stream; here an admin does.
	admin, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := ajs.CreateStream(t.Context(), jetstream.StreamConfig{Name: cfg.InputStream, Subjects: []string{cfg.InputPrefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var asyncErrs []error
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("ingest", "ingest"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			asyncErrs = append(asyncErrs, err)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	src, err := keys.LoadSources([]byte("sources: {orders: {verify: none}, gh: {dedupe: github, verify: github}}"))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_GH=s3cret"}, Sources: src.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	// The replay guard's bucket, created by the ingest user as dedupeworker ingest does.
	window, err := kvwindow.New(t.Context(), js, kvwindow.Config{Bucket: cfg.Bucket + "-replay", Shards: 1, Provision: true})
	if err != nil {
		t.Fatalf("the replay guard's bucket as the ingest user: %v", err)
	}
	rcv, err := receiver.New(receiver.Config{JetStream: js, Policy: policy, Window: window, InputStream: cfg.InputStream, InputPrefix: cfg.InputPrefix})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec
	}
	if rec := do(http.MethodGet, "/readyz", ""); rec.Code != http.StatusOK {
		t.Errorf("GET /readyz as the ingest user: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	if rec := do(http.MethodPost, "/hooks/acme/orders", `{"data":{"order":{"id":"o-1"}}}`); rec.Code != http.StatusAccepted {
		t.Errorf("POST /hooks/acme/orders as the ingest user: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// A guarded source: a GitHub delivery, its retry (a read of the guard's claim) and a replay under another id.
	ghBody := `{"zen":"x"}`
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(ghBody))
	for _, c := range []struct{ id, want string }{{"g-1", "accepted: "}, {"g-1", "accepted: "}, {"g-2", "accepted, not published"}} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/acme/gh", strings.NewReader(ghBody))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		req.Header.Set("X-GitHub-Delivery", c.id)
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted || !strings.HasPrefix(rec.Body.String(), c.want) {
			t.Errorf("POST /hooks/acme/gh (%s) as the ingest user: %d %s, want %q", c.id, rec.Code, strings.TrimSpace(rec.Body.String()), c.want)
		}
	}
	msg, err := stream.GetLastMsgForSubject(t.Context(), cfg.InputPrefix+".acme.orders")
	if err != nil {
		t.Fatalf("the delivery is not in stream %s: %v", cfg.InputStream, err)
	}
	if msg.Header.Get("Ingest-Verified") != "true" {
		t.Errorf("stored envelope: Ingest-Verified %q, want true", msg.Header.Get("Ingest-Verified"))
	}

	// No permission was refused on the way (a refused publish or subscription is only reported asynchronously).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	errs := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asyncErrs)
	}
	if e := errs(); len(e) > 0 {
		t.Fatalf("the receiver's user was refused: %v", e)
	}

	// Anything else is refused: the server applies the lists.
	refused := cfg.OutputPrefix + ".acme.orders"
	if err := nc.Publish(refused, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	for deadline := time.Now().Add(5 * time.Second); len(errs()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if e := errs(); len(e) != 1 || !strings.Contains(strings.ToLower(e[0].Error()), "permissions violation") ||
		!strings.Contains(e[0].Error(), refused) {
		t.Errorf("publishing to %s as the ingest user: errors %v, want one permissions violation", refused, e)
	}
}
