package receiver_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/receiver"
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

// BenchmarkHandler measures the handler alone, without HTTP connections: a GitHub-signed 12 KiB delivery through
// Receiver.ServeHTTP, beside "bare" — the handler anyone would write first (read the body, publish it with the
// request's headers, wait for the PubAck) — on the same real nats-server. The difference is what the receiver's
// checks cost: routing, the header filter and size, the byte budget, the signature, the metrics.
func BenchmarkHandler(b *testing.B) {
	e := startJS(b, true)
	r, _ := newReceiver(b, e, testPolicy(b))
	body := []byte(`{"action":"opened","number":1347,"pull_request":{"title":"` + strings.Repeat("x", 12<<10) + `"}}`)
	header := http.Header{
		"Accept":              {"*/*"},
		"Content-Type":        {"application/json"},
		"User-Agent":          {"GitHub-Hookshot/2b3f4c1"},
		"X-Github-Event":      {"pull_request"},
		"X-Github-Delivery":   {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"X-Github-Hook-Id":    {"371299123"},
		"X-Hub-Signature-256": {githubSig(ghNew, string(body))},
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := nats.Header(req.Header)
		h.Set(contract.HeaderVerified, "true")
		msg := &nats.Msg{Subject: "ingest.acme.gh", Header: h, Data: data}
		if _, err := e.js.PublishMsg(req.Context(), msg, jetstream.WithExpectStream("INGEST")); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	for _, side := range []struct {
		name string
		h    http.Handler
	}{{"receiver", r}, {"bare", bare}} {
		b.Run(side.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/hooks/acme/gh", bytes.NewReader(body))
				maps.Copy(req.Header, header)
				rec := httptest.NewRecorder()
				side.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted {
					b.Fatalf("%d %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// BenchmarkReplayGuard measures what the replay guard costs a GitHub delivery: the handler (as BenchmarkHandler,
// 12 KiB bodies, one real nats-server with file storage) with the guard off, and on over the worker's window
// (kvwindow, file storage): "first" gives every delivery a body of its own (the guard's one create, won), "retry"
// sends one body under one id again and again (a create refused, then a read from the stream leader: Owned).
// Every iteration signs its body, on every side alike.
func BenchmarkReplayGuard(b *testing.B) {
	e := startJS(b, true)
	cfg := kvwindow.DefaultConfig()
	window, err := kvwindow.New(context.Background(), e.js, cfg)
	if err != nil {
		b.Fatal(err)
	}
	off, _ := newReceiver(b, e, policyOf(b, "sources:\n  gh: {dedupe: github, verify: {scheme: github, replay_guard: off}}\n"))
	on, _ := newReceiver(b, e, testPolicy(b), func(c *receiver.Config) { c.Window = window })
	pad := strings.Repeat("x", 12<<10)
	header := http.Header{
		"Accept":            {"*/*"},
		"Content-Type":      {"application/json"},
		"User-Agent":        {"GitHub-Hookshot/2b3f4c1"},
		"X-Github-Event":    {"pull_request"},
		"X-Github-Hook-Id":  {"371299123"},
		"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
	}
	// Bodies are never repeated, not even when -count runs a side again over the same window.
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	n := 0
	for _, side := range []struct {
		name  string
		h     http.Handler
		fresh bool
	}{{"off", off, true}, {"on/first", on, true}, {"on/retry", on, false}} {
		b.Run(side.name, func(b *testing.B) {
			b.SetBytes(int64(12 << 10))
			b.ReportAllocs()
			body := []byte(`{"n":"` + stamp + `-retry","pad":"` + pad + `"}`)
			for b.Loop() {
				if side.fresh {
					n++
					body = []byte(`{"n":"` + stamp + "-" + strconv.Itoa(n) + `","pad":"` + pad + `"}`)
				}
				req := httptest.NewRequest(http.MethodPost, "/hooks/acme/gh", bytes.NewReader(body))
				maps.Copy(req.Header, header)
				req.Header["X-Hub-Signature-256"] = []string{githubSig(ghNew, string(body))}
				rec := httptest.NewRecorder()
				side.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted || !strings.HasPrefix(rec.Body.String(), "accepted: INGEST") {
					b.Fatalf("%d %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}
