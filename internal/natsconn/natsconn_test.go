package natsconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// logger writes debug-level text lines into l, which the test reads while the connection writes.
func logger(l *natstest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type result struct {
	nc  *nats.Conn
	err error
}

// A worker started together with its NATS server waits for it: the first connection is retried, each attempt
// logged, and succeeds once the server listens.
func TestConnectWaitsForTheServer(t *testing.T) {
	port := natstest.FreePort(t)
	logs := &natstest.Buffer{}
	done := make(chan result, 1)
	go func() {
		nc, err := natsconn.ConnectContext(context.Background(), natsconn.Config{
			URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Name: "t", Logger: logger(logs),
			Origin: "url from the test", RetryFor: time.Minute,
		})
		done <- result{nc, err}
	}()
	natstest.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(logs.String(), "NATS not reachable yet; retrying"); n < 2 {
			return fmt.Errorf("%d retries logged: %s", n, logs.String())
		}
		return nil
	})
	if l := logs.String(); !strings.Contains(l, "from=\"url from the test\"") || !strings.Contains(l, "attempt=2") {
		t.Errorf("retry log lacks origin or attempt: %s", l)
	}
	natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Port = port }))
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("connect: %v", r.err)
		}
		defer r.nc.Close()
		if !r.nc.IsConnected() {
			t.Fatal("not connected")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still not connected 20s after the server started; logs:\n%s", logs.String())
	}
}

// A server that rejects the credentials is not retried, however long the retry bound: the answer comes at once,
// with the URL redacted and no secret.
func TestConnectAuthFailsFast(t *testing.T) {
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Username, o.Password = "dedupe", "s3cret-pass" }))
	tok := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.Authorization = "right-token" }))
	hostPort := func(s *natstest.Server) string { return fmt.Sprintf("127.0.0.1:%d", s.Opts.Port) }
	cases := []struct {
		name   string
		cfg    natsconn.Config
		secret string
	}{
		{"password in url", natsconn.Config{URL: "nats://dedupe:wrong-pass@" + hostPort(srv)}, "wrong-pass"},
		{"user and password", natsconn.Config{URL: srv.URL(), User: "dedupe", Password: "wrong-pass"}, "wrong-pass"},
		{"no password", natsconn.Config{URL: srv.URL()}, ""},
		{"token", natsconn.Config{URL: tok.URL(), Token: "wrong-token"}, "wrong-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &natstest.Buffer{}
			tc.cfg.RetryFor, tc.cfg.Logger, tc.cfg.Origin = 2*time.Minute, logger(logs), "url from the test"
			start := time.Now()
			nc, err := natsconn.Connect(tc.cfg)
			elapsed := time.Since(start)
			if err == nil {
				nc.Close()
				t.Fatal("connected with wrong credentials")
			}
			msg := err.Error()
			if !errors.Is(err, nats.ErrAuthorization) || !strings.HasPrefix(msg, "natsconn: connect to nats://") ||
				!strings.Contains(msg, "(url from the test)") {
				t.Errorf("error %q", msg)
			}
			if tc.secret != "" && (strings.Contains(msg, tc.secret) || strings.Contains(logs.String(), tc.secret)) {
				t.Errorf("the secret leaks: %q %s", msg, logs.String())
			}
			if strings.Contains(tc.cfg.URL, "@") && !strings.Contains(msg, "[redacted]@") {
				t.Errorf("url not redacted: %q", msg)
			}
			if elapsed > 500*time.Millisecond || strings.Contains(logs.String(), "retrying") {
				t.Errorf("took %s (retried?): %s", elapsed, logs.String())
			}
		})
	}
	// The right credentials connect.
	for _, cfg := range []natsconn.Config{
		{URL: srv.URL(), User: "dedupe", Password: "s3cret-pass"},
		{URL: "nats://dedupe:s3cret-pass@" + hostPort(srv)},
		{URL: tok.URL(), Token: "right-token"},
	} {
		nc, err := natsconn.Connect(cfg)
		if err != nil {
			t.Fatalf("%s: %v", natsconn.Redact(cfg.URL), err)
		}
		nc.Close()
	}
}

// With nothing listening, the first connection gives up when the bound is over, saying how often it tried.
func TestConnectRetryBound(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))
	for _, bound := range []time.Duration{0, 1200 * time.Millisecond} {
		logs := &natstest.Buffer{}
		start := time.Now()
		_, err := natsconn.Connect(natsconn.Config{URL: url, RetryFor: bound, Logger: logger(logs)})
		elapsed := time.Since(start)
		if err == nil || !errors.Is(err, nats.ErrNoServers) {
			t.Fatalf("bound %s: %v", bound, err)
		}
		retries := strings.Count(logs.String(), "retrying")
		switch {
		case bound == 0 && (retries != 0 || elapsed > time.Second || strings.Contains(err.Error(), "gave up")):
			t.Errorf("no bound: %d retries in %s: %v", retries, elapsed, err)
		case bound > 0 && (elapsed < bound || elapsed > bound+2*time.Second):
			t.Errorf("bound %s: gave up after %s", bound, elapsed)
		case bound > 0 && (retries < 2 || !strings.Contains(err.Error(), fmt.Sprintf("gave up after %d attempts", retries+1))):
			t.Errorf("bound %s: %d retries logged; error %v", bound, retries, err)
		}
	}
}

// Cancelling the context ends the wait at once.
func TestConnectCancelled(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	logs := &natstest.Buffer{}
	done := make(chan error, 1)
	go func() {
		_, err := natsconn.ConnectContext(ctx, natsconn.Config{URL: url, RetryFor: time.Hour, Logger: logger(logs)})
		done <- err
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "retrying") {
			return errors.New("no retry yet")
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted after") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5s after the context ended")
	}
}

// A bad setup fails before the server is even there: an unreadable creds or seed file, a CA file that is no PEM.
func TestConnectBadFilesFailAtOnce(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	empty := filepath.Join(dir, "empty.creds")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))
	for _, tc := range []struct {
		name string
		cfg  natsconn.Config
		want string
	}{
		{"missing creds", natsconn.Config{Creds: filepath.Join(dir, "nope.creds")}, "natsconn: creds file: open "},
		{"empty creds", natsconn.Config{Creds: empty}, "natsconn: creds file " + empty + ": is empty"},
		{"missing seed", natsconn.Config{NkeySeedFile: filepath.Join(dir, "nope.nk")}, "natsconn: nkey seed file "},
		{"garbage CA", natsconn.Config{TLSCA: garbage}, "failed to parse root certificate"},
		{"missing CA", natsconn.Config{TLSCA: filepath.Join(dir, "nope.pem")}, "rootCA file"},
		{"garbage cert", natsconn.Config{TLSCert: garbage, TLSKey: garbage}, "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.URL, tc.cfg.RetryFor = url, time.Minute
			start := time.Now()
			_, err := natsconn.Connect(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "natsconn: ") {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if time.Since(start) > 500*time.Millisecond {
				t.Fatalf("took %s", time.Since(start))
			}
		})
	}
}

// A TLS server that refuses the client's certificate (or its absence), or a server certificate the client does not
// trust, fails at once rather than as an unreachable server.
func TestConnectTLSFailsFast(t *testing.T) {
	dir := t.TempDir()
	good, other := newPKI(t, dir, "good"), newPKI(t, dir, "other")
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: good.serverCert, KeyFile: good.serverKey, CaFile: good.ca, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, true, tc, 2
	}))
	url := fmt.Sprintf("tls://127.0.0.1:%d", srv.Opts.Port)
	nc, err := natsconn.Connect(natsconn.Config{URL: url, TLSCA: good.ca, TLSCert: good.clientCert, TLSKey: good.clientKey})
	if err != nil {
		t.Fatalf("good certificates: %v", err)
	}
	nc.Close()
	for _, c := range []struct {
		name string
		cfg  natsconn.Config
	}{
		{"no client certificate", natsconn.Config{TLSCA: good.ca}},
		{"client certificate of another CA", natsconn.Config{TLSCA: good.ca, TLSCert: other.clientCert, TLSKey: other.clientKey}},
		{"server not trusted", natsconn.Config{TLSCA: other.ca, TLSCert: good.clientCert, TLSKey: good.clientKey}},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &natstest.Buffer{}
			c.cfg.URL, c.cfg.RetryFor, c.cfg.Logger = url, time.Minute, logger(logs)
			start := time.Now()
			_, err := natsconn.Connect(c.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "natsconn: connect to tls://") {
				t.Fatalf("got %v", err)
			}
			if time.Since(start) > 2*time.Second || strings.Contains(logs.String(), "retrying") {
				t.Fatalf("took %s (%v); logs: %s", time.Since(start), err, logs.String())
			}
			t.Logf("%v", err)
		})
	}
}

func TestRedact(t *testing.T) {
	got := natsconn.Redact("nats://u:secret@h1:4222, tls://tok@h2:4222,nats://h3")
	if got != "nats://[redacted]@h1:4222,tls://[redacted]@h2:4222,nats://h3" {
		t.Fatal(got)
	}
}

// pki is a CA with a server and a client certificate, as files.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := pki{ca: filepath.Join(dir, name+"-ca.pem")}
	write(p.ca, "CERTIFICATE", caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath *string) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
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
		write(*certPath, "CERTIFICATE", der)
		write(*keyPath, "PRIVATE KEY", keyDER)
	}
	leaf(2, "server", x509.ExtKeyUsageServerAuth, &p.serverCert, &p.serverKey)
	leaf(3, "client", x509.ExtKeyUsageClientAuth, &p.clientCert, &p.clientKey)
	return p
}
