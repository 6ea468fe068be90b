package receiver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkReceiver measures one delivery's cost end to end in one process: a GitHub-signed POST of a 1 KiB body
// over a real HTTP connection (httptest), signature check, header filtering and a JetStream publish acknowledged
// by a real nats-server (file storage). "serial" is the latency of one request at a time; "parallel" keeps
// GOMAXPROCS requests in flight.
func BenchmarkReceiver(b *testing.B) {
	e := startJS(b, true)
	r, _ := newReceiver(b, e, testPolicy(b))
	srv := httptest.NewServer(r)
	defer srv.Close()
	body := []byte(`{"action":"opened","number":1347,"pull_request":{"title":"` + strings.Repeat("x", 940) + `"}}`)
	sig := githubSig(ghNew, string(body))
	post := func(client *http.Client) error {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/acme/gh", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		client := srv.Client()
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if err := post(client); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		defer client.CloseIdleConnections()
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := post(client); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
