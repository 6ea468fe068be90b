package receiver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// A receiver for GitHub deliveries on an in-process nats-server: GitHub's documented example delivery is stored
// with Ingest-Verified: true (the client's own Ingest-Verified is dropped); a forged one is refused.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "receiver-example")
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Println("nats-server not ready")
		return
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"}})
	if err != nil {
		fmt.Println(err)
		return
	}

	sources, _ := keys.LoadSources([]byte(`sources: {github: {dedupe: github, verify: github}}`))
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{
		Environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=It's a Secret to Everybody"},
		Sources: sources.IDs(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: sources, Secrets: secrets})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := receiver.New(receiver.Config{JetStream: js, Policy: policy})
	if err != nil {
		fmt.Println(err)
		return
	}

	post := func(signature string) {
		req := httptest.NewRequest("POST", "/hooks/acme/github", strings.NewReader("Hello, World!"))
		req.Header.Set("X-Hub-Signature-256", signature)
		req.Header.Set("Ingest-Verified", "true") // never trusted
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req) // in production: r.Serve(ctx, listener)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	post("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	post("sha256=" + strings.Repeat("0", 64))

	m, err := stream.GetMsg(ctx, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Subject, m.Header.Values("Ingest-Verified"), string(m.Data))
	// Output:
	// 202 accepted: INGEST seq 1
	// 401 signature does not verify: github: X-Hub-Signature-256: signature mismatch: matches none of 1 secret
	// ingest.acme.github [true] Hello, World!
}

// Secrets from a directory laid out as a Kubernetes Secret volume gives it (a file per key) and from a variable:
// formatting them shows where they came from and how many, never a secret.
func ExampleLoadSecrets() {
	dir, _ := os.MkdirTemp("", "secrets")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "stripe"), []byte("whsec_old\nwhsec_new\n"), 0o600) // a rotation: both verify
	_ = os.WriteFile(filepath.Join(dir, "acme.stripe"), []byte("whsec_acme\n"), 0o600)      // tenant acme's own

	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{
		Dir:     dir,
		Environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=gh-old,gh-new", "HOME=/root"},
		Sources: []string{"github", "stripe"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	text := strings.ReplaceAll(secrets.String(), dir, "/tmp/secrets") // the temporary directory's random name
	fmt.Println(strings.ReplaceAll(text, "; ", "\n"))

	_, err = receiver.LoadSecrets(receiver.SecretsConfig{
		Environ: []string{"DEDUPE_INGEST_SECRET_GITHB=typo"},
		Sources: []string{"github", "stripe"},
	})
	fmt.Println(err)
	// Output:
	// github (every tenant): 2 secrets from DEDUPE_INGEST_SECRET_GITHUB
	// stripe (every tenant): 2 secrets from secrets directory /tmp/secrets/stripe
	// stripe (tenant acme): 1 secret from secrets directory /tmp/secrets/acme.stripe
	// receiver: DEDUPE_INGEST_SECRET_GITHB: names no declared source (a source's variable is DEDUPE_INGEST_SECRET_ followed by its id in upper case, '-' as '_'; declared: github, stripe)
}

// Every declared source says how it is verified; a source without a verify block stops the receiver.
func ExampleNewPolicy() {
	sources, _ := keys.LoadSources([]byte(`sources:
  github: {dedupe: github, verify: github}
  stripe: {dedupe: stripe, verify: {scheme: stripe, tolerance: 10m}, on_invalid: forward}
  forms:  {dedupe: {json: id}, verify: none}
`))
	secrets, _ := receiver.LoadSecrets(receiver.SecretsConfig{
		Environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=gh-secret", "DEDUPE_INGEST_SECRET_STRIPE=whsec_x"},
		Sources: sources.IDs(),
	})
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: sources, Secrets: secrets})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range policy.Sources() {
		fmt.Printf("%s: verify %s, on_invalid %s\n", s.Source, s.Scheme, s.OnInvalid)
	}

	sources, _ = keys.LoadSources([]byte(`sources: {orders: {dedupe: {json: id}}}`))
	_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: sources})
	fmt.Println(err)
	// Output:
	// forms: verify none, on_invalid reject
	// github: verify github, on_invalid reject
	// stripe: verify stripe, on_invalid forward
	// receiver: sources.orders: no verify block: declare how its deliveries are verified, verify: <scheme> (github, hmac, shopify, standard_webhooks, stripe, svix) or verify: none to accept unsigned deliveries
}
