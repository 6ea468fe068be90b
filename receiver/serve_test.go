package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// acceptedSeq reads the sequence out of a 202 answer ("accepted: INGEST seq 7").
func acceptedSeq(t *testing.T, answer string) uint64 {
	t.Helper()
	_, num, ok := strings.Cut(strings.TrimSpace(answer), " seq ")
	n, err := strconv.ParseUint(strings.SplitN(num, ":", 2)[0], 10, 64)
	if !ok || err != nil {
		t.Fatalf("answer %q names no sequence", answer)
	}
	return n
}

// When JetStream cannot store a delivery the answer is 503 with Retry-After, and nothing claims it was taken: no
// input stream, another stream capturing the subject, the server down. Once the server is back, the provider's
// retry is stored.
func TestReceiverUnavailable(t *testing.T) {
	e := startJS(t, false)
	r, logs := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.PublishTimeout = 2 * time.Second })
	post := func() *httptest.ResponseRecorder {
		return do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), `{"n":1}`)
	}
	check503 := func(what string, rec *httptest.ResponseRecorder) {
		t.Helper()
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" || !strings.Contains(rec.Body.String(), "retry later") {
			t.Fatalf("%s: %d %v %q", what, rec.Code, rec.Header(), rec.Body.String())
		}
	}

	// /readyz answers from a lookup up to a second old: polled.
	readyz := func(what string, want int, text string) {
		t.Helper()
		natstest.Eventually(t, 10*time.Second, func() error {
			if rec := do(r, http.MethodGet, "/readyz", nil, ""); rec.Code != want || !strings.Contains(rec.Body.String(), text) {
				return fmt.Errorf("/readyz %s: %d %q", what, rec.Code, rec.Body.String())
			}
			return nil
		})
	}
	check503("no input stream", post())
	readyz("without the stream", 503, "input stream INGEST")

	// Another stream captures the subject: Nats-Expected-Stream makes the server refuse the publish.
	e.createStream(t, "OTHER", "ingest.>")
	check503("another stream", post())
	if !strings.Contains(logs.String(), "input stream does not capture the subject") {
		t.Errorf("misrouting not logged at error:\n%s", logs.String())
	}
	ctx := context.Background()
	other, _ := e.js.Stream(ctx, "OTHER")
	if info, _ := other.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("OTHER stored %d envelopes", info.State.Msgs)
	}
	if err := e.js.DeleteStream(ctx, "OTHER"); err != nil {
		t.Fatal(err)
	}
	e.createStream(t, "INGEST", "ingest.>")
	rec := post()
	if rec.Code != http.StatusAccepted {
		t.Fatalf("with the stream: %d %q", rec.Code, rec.Body.String())
	}
	accepted := []uint64{acceptedSeq(t, rec.Body.String())}

	// The server goes away: 503 and not ready, saying the connection is down (not what a request failed with), until
	// it is back.
	e.srv.Shutdown()
	check503("server down", post())
	readyz("with the server down", 503, "not ready: receiver: not connected to NATS (")
	if n := strings.Count(logs.String(), "JetStream did not acknowledge it"); n != 1 {
		t.Errorf("unavailability logged %d times; want once per 10s", n)
	}
	e.srv.Restart()
	natstest.Eventually(t, 20*time.Second, func() error { // the provider retries
		rec := post()
		if rec.Code != http.StatusAccepted {
			return fmt.Errorf("%d %s", rec.Code, rec.Body.String())
		}
		accepted = append(accepted, acceptedSeq(t, rec.Body.String()))
		return nil
	})
	for _, seq := range accepted {
		if m := e.msg(t, seq); string(m.Data) != `{"n":1}` {
			t.Errorf("seq %d: %q", seq, m.Data)
		}
	}
	readyz("after the restart", 200, "ready")
	text := metricsText(t, r)
	// A post right after the shutdown may be written before the client sees the connection go: it then gets no
	// answer and is counted as unconfirmed rather than unavailable. Either is a 503 that claims nothing was taken.
	unavailable := metricValue(text, requests("open", receiver.OutcomeUnavailable))
	unconfirmed := metricValue(text, requests("open", receiver.OutcomeUnconfirmed))
	if unavailable < 2 || unavailable+unconfirmed < 3 {
		t.Errorf("unavailable counted %v times, unconfirmed %v; want 3 in all", unavailable, unconfirmed)
	}
}

// holdRequest starts a POST through srv whose body is written only when release is called, and waits until the
// receiver is reading its body (its reading gauge counts it). result delivers the answer.
func holdRequest(t *testing.T, r *receiver.Receiver, url string, want float64) (release func(), result <-chan string) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url+"/hooks/acme/open", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Id", "held")
	res := make(chan string, 1)
	go func() { // owned by the test: ends when the request does
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		res <- fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}()
	_, _ = pw.Write([]byte(`{"part":`))
	natstest.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(metricsText(t, r), "dedupeworker_ingest_reading"); v != want {
			return fmt.Errorf("reading %v, want %v", v, want)
		}
		return nil
	})
	t.Cleanup(func() { pw.CloseWithError(errors.New("test ended")) })
	return func() {
		_, _ = pw.Write([]byte(`1}`))
		_ = pw.Close()
	}, res
}

// MaxInFlight bounds the deliveries being published at once: with the one slot held by a publish whose PubAck is
// late (held in a relay in front of the server), one more is answered 503 at once, with Retry-After.
func TestReceiverOverloaded(t *testing.T) {
	e := startJS(t, true)
	proxy := startProxy(t, strings.TrimPrefix(e.srv.URL(), "nats://"))
	nc := natstest.Connect(t, proxy.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newReceiver(t, &jsEnv{srv: e.srv, nc: nc, js: js}, testPolicy(t), func(c *receiver.Config) {
		c.MaxInFlight = 1
		c.PublishTimeout = time.Minute
	})
	proxy.hold()
	first := make(chan string, 1)
	go func() { // owned by the test: ends with the publish, once the relay is released
		rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), "{}")
		first <- fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}()
	natstest.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(metricsText(t, r), "dedupeworker_ingest_in_flight"); v != 1 {
			return fmt.Errorf("in flight %v, want 1", v)
		}
		return nil
	})
	rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "2"), "{}")
	proxy.release()
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "busy") {
		t.Fatalf("second request: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
	}
	if got := <-first; !strings.HasPrefix(got, "202 accepted: INGEST seq 1") {
		t.Fatalf("first request: %s", got)
	}
	text := metricsText(t, r)
	if v := metricValue(text, requests("open", "overloaded")); v != 1 {
		t.Errorf("overloaded counted %v times", v)
	}
	if v := metricValue(text, "dedupeworker_ingest_in_flight_limit"); v != 1 {
		t.Errorf("in_flight_limit %v", v)
	}
}

// Shutdown lets the request in flight finish (and be stored), refuses new connections, and returns nil.
func TestReceiverGracefulShutdown(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()

	release, result := holdRequest(t, r, url, 1)
	cancel()
	natstest.Eventually(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
			return errors.New("still accepting connections")
		}
		return nil
	})
	if err := r.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Ready while shutting down: %v", err)
	}
	release()
	if got := <-result; !strings.HasPrefix(got, "202 accepted: INGEST seq 1") {
		t.Fatalf("in-flight request: %s", got)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if m := e.msg(t, 1); string(m.Data) != `{"part":1}` {
		t.Fatalf("stored %q", m.Data)
	}
}

// A request that does not finish within ShutdownTimeout is cut, and Serve says so.
func TestReceiverShutdownBound(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.ShutdownTimeout = 300 * time.Millisecond })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	release, result := holdRequest(t, r, "http://"+ln.Addr().String(), 1)
	start := time.Now()
	cancel()
	err = <-served
	if err == nil || !strings.Contains(err.Error(), "receiver: shutdown: requests still running after 300ms were cut") {
		t.Fatalf("Serve: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	release() // the client learns that its connection is gone once it is done writing
	if got := <-result; !strings.HasPrefix(got, "error: ") {
		t.Fatalf("cut request answered: %s", got)
	}
}

// A listener that fails ends Serve with the error.
func TestReceiverServeListenerError(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := r.Serve(context.Background(), ln); err == nil || !strings.HasPrefix(err.Error(), "receiver: serve on ") {
		t.Fatalf("Serve on a closed listener: %v", err)
	}
}

// Requests are counted by source and outcome (undeclared sources as "other"), failures by verify reason; every
// declared source's series exist from the start.
func TestReceiverMetrics(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.MaxBody = 16 })
	body := `{"id":"evt_1"}`
	for _, q := range []struct {
		method, path string
		h            map[string][]string
		body         string
	}{
		{"POST", "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig(ghOld, body)), body},
		{"POST", "/hooks/acme/gh", hdr("X-Hub-Signature-256", githubSig("forged", body)), body},
		{"POST", "/hooks/acme/gh", nil, body},
		{"POST", "/hooks/acme/gh", hdr("X-Hub-Signature-256", "sha256=zz"), body},
		{"GET", "/hooks/acme/gh", nil, ""},
		{"POST", "/hooks/acme/st", hdr("Stripe-Signature", stripeSig("whsec_x", time.Now(), body)), body},
		{"POST", "/hooks/globex/st", nil, body},
		{"POST", "/hooks/acme/undeclared-1", nil, body},
		{"POST", "/hooks/acme/undeclared-2", nil, body},
		{"POST", "/elsewhere", nil, body},
		{"POST", "/hooks/acme/open", hdr("X-Id", "1"), strings.Repeat("x", 17)},
		{"GET", "/healthz", nil, ""},
	} {
		do(r, q.method, q.path, q.h, q.body)
	}
	text := metricsText(t, r)
	for series, want := range map[string]float64{
		requests("gh", "accepted"):                                                  1,
		requests("gh", "rejected"):                                                  3,
		requests("gh", "method_not_allowed"):                                        1,
		requests("st", "forwarded_unverified"):                                      1,
		requests("st", "not_found"):                                                 1,
		requests("other", "not_found"):                                              3,
		requests("open", "too_large"):                                               1,
		requests("shop", "unavailable"):                                             0,
		requests("sw", "accepted"):                                                  0,
		`dedupeworker_ingest_verify_failures_total{reason="mismatch",source="gh"}`:  1,
		`dedupeworker_ingest_verify_failures_total{reason="missing",source="gh"}`:   1,
		`dedupeworker_ingest_verify_failures_total{reason="malformed",source="gh"}`: 1,
		`dedupeworker_ingest_verify_failures_total{reason="mismatch",source="st"}`:  1,
		"dedupeworker_ingest_publish_duration_seconds_count":                        2,
		"dedupeworker_ingest_in_flight":                                             0,
		"dedupeworker_ingest_reading":                                               0,
		"dedupeworker_ingest_buffered_bytes":                                        0,
		"dedupeworker_ingest_buffered_bytes_limit":                                  64 << 20,
		`dedupeworker_ingest_request_duration_seconds_count{outcome="accepted"}`:    1,
		`dedupeworker_ingest_request_duration_seconds_count{outcome="rejected"}`:    3,
		`dedupeworker_ingest_request_duration_seconds_count{outcome="not_found"}`:   4,
	} {
		if got := metricValue(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if strings.Contains(text, "undeclared") || strings.Contains(text, "acme") {
		t.Error("a tenant or an undeclared source became a label value")
	}
}

// A delivery within MaxBody that the NATS server (max_payload) or the stream (max_msg_size) refuses for its size
// is answered 413: retrying it cannot help.
func TestReceiverTooLargeForNATS(t *testing.T) {
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.MaxPayload = 8 << 10 }))
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &jsEnv{srv: srv, nc: nc, js: js}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "INGEST", Subjects: []string{"ingest.>"}, MaxMsgSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	r, _ := newReceiver(t, e, testPolicy(t))
	for _, c := range []struct {
		size int
		want string
	}{
		{10 << 10, "maximum payload exceeded"},
		{6 << 10, "message size exceeds maximum allowed"},
	} {
		rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), strings.Repeat("x", c.size))
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%d bytes: %d %q", c.size, rec.Code, rec.Body.String())
		}
	}
	if rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), "{}"); rec.Code != http.StatusAccepted {
		t.Errorf("small body: %d %q", rec.Code, rec.Body.String())
	}
	if v := metricValue(metricsText(t, r), requests("open", "too_large")); v != 2 {
		t.Errorf("too_large counted %v times", v)
	}
}
