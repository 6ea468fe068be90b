package receiver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// serveOn runs r.Serve on a loopback listener until the test ends and returns its address.
func serveOn(t *testing.T, r *receiver.Receiver) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	return ln.Addr().String()
}

// rawPost writes a request as given (header names exactly as written, in any letter case) and returns the status
// code and the answer's body.
func rawPost(t *testing.T, addr, path string, headers []string, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: ingest.test\r\nContent-Length: %d\r\nConnection: close\r\n", path, len(body))
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	// Written beside the read: a server that answers before it has read everything (431) must not leave the
	// write blocked on a full socket.
	go func() { _, _ = io.WriteString(c, b.String()) }() // owned by the test: ends when c is closed
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(text))
}

// foldName is a header name as the receiver compares it: upper case, '_' as '-'.
func foldName(name string) string { return strings.ReplaceAll(strings.ToUpper(name), "_", "-") }

// A client's headers that NATS clients or JetStream read (Status and Description make nats.go take an envelope
// with an empty body for a server status message, and the worker never sees it), and the receiver's and the
// worker's own names spelt with '_', never reach the stream: the envelope is stored without them, and a JetStream
// consumer receives it as a message.
func TestReceiverDropsControlHeaders(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	addr := serveOn(t, r)
	control := []string{
		"Status: 409", "Description: Consumer Deleted", "status: 100", "DESCRIPTION: Idle Heartbeat",
		"Nats-Pin-Id: x", "nats-msg-id: client-chosen", "Nats_Msg_Id: client-chosen-2", "NATS_EXPECTED_STREAM: OTHER",
		"Nats-Pending-Messages: 1", "KV-Operation: DEL", "kv_operation: PURGE",
		"Ingest_Verified: true", "ingest_verified: true", "Dedupe_Status: unique", "dedupe_key: forged",
	}
	status, answer := rawPost(t, addr, "/hooks/acme/open", append([]string{"X-Id: 1", "X-Kept_Name: kept"}, control...), "")
	if status != http.StatusAccepted {
		t.Fatalf("answer %d %q", status, answer)
	}
	m := e.msg(t, 1)
	var stored []string
	for k := range m.Header {
		stored = append(stored, k)
	}
	slices.Sort(stored)
	for _, h := range control {
		name, _, _ := strings.Cut(h, ":")
		for k := range m.Header {
			if foldName(k) == foldName(name) && !(k == contract.HeaderVerified || k == "Nats-Expected-Stream") {
				t.Errorf("stored %s (sent as %s); stored headers: %v", k, name, stored)
			}
		}
	}
	if got := m.Header.Values(contract.HeaderVerified); !slices.Equal(got, []string{"true"}) {
		t.Errorf("Ingest-Verified %q, want [true]", got)
	}
	if m.Header.Get("X-Id") != "1" || m.Header.Get("X-Kept_name") != "kept" {
		t.Errorf("end-to-end headers lost: %v", stored)
	}

	// What the worker's consumer sees: a message, not a status. Before the fix nats.go read the stored Status: 409
	// as a server status and Fetch returned no message at all (got 0 messages, err "nats: consumer deleted").
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.js.CreateConsumer(ctx, "INGEST", jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for msg := range batch.Messages() {
		n++
		_ = msg.Ack()
	}
	if n != 1 || batch.Error() != nil {
		t.Fatalf("the consumer got %d messages (err %v), want the envelope", n, batch.Error())
	}
}

// withholder opens a connection, sends a hook request's headers with a Content-Length and never the body: the
// cheapest way to hold a request open.
func withholder(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /hooks/acme/gh HTTP/1.1\r\nHost: ingest.test\r\nContent-Length: 4194304\r\n"+
		"X-Hub-Signature-256: sha256=00\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// metricOr0 is a sample's value, 0 when the series does not exist (yet).
func metricOr0(text, series string) float64 { return max(metricValue(text, series), 0) }

// Connections that send headers and withhold the body hold no publish slot and only the bytes they sent: beside
// many of them, every genuine signed GitHub delivery is answered 202. Before the fix each withholder took one of
// MaxInFlight slots before its body was read (for up to the 30 s read timeout): with 4 slots and 32 withholders,
// 20 of 20 genuine deliveries got "503 busy".
func TestReceiverSlowBodiesHoldNoSlot(t *testing.T) {
	e := startJS(t, true)
	const slots, withholders, genuine = 4, 32, 20
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.MaxInFlight = slots })
	addr := serveOn(t, r)
	for range withholders {
		withholder(t, addr)
	}
	// Every withholder has reached the handler: it is reading its body, holds a slot, or was turned away.
	natstest.Eventually(t, 10*time.Second, func() error {
		text := metricsText(t, r)
		n := metricOr0(text, "dedupeworker_ingest_reading") + metricOr0(text, "dedupeworker_ingest_in_flight") +
			metricOr0(text, requests("gh", receiver.OutcomeOverloaded))
		if n != withholders {
			return fmt.Errorf("%v of %d withholders handled", n, withholders)
		}
		return nil
	})
	body := `{"zen":"Keep it logically awesome.","hook_id":1}`
	var failed []string
	for i := range genuine {
		status, answer := rawPost(t, addr, "/hooks/acme/gh", []string{
			"X-Github-Delivery: d-" + itoa(int64(i)), "X-Hub-Signature-256: " + githubSig(ghNew, body)}, body)
		if status != http.StatusAccepted {
			failed = append(failed, fmt.Sprintf("%d %s", status, answer))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d genuine deliveries beside %d withholders were not accepted: %q", len(failed), genuine, withholders, failed[0])
	}
	if got := e.lastSeq(t); got != genuine {
		t.Fatalf("INGEST holds %d envelopes, want %d", got, genuine)
	}
}

// A body that does not arrive within BodyTimeout is cut (408, counted as body_timeout) and gives back what it held.
func TestReceiverBodyTimeout(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.BodyTimeout = time.Second })
	addr := serveOn(t, r)
	c := withholder(t, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("withheld body answered %d, want 408", resp.StatusCode)
	}
	text := metricsText(t, r)
	for series, want := range map[string]float64{
		requests("gh", receiver.OutcomeBodyTimeout): 1,
		"dedupeworker_ingest_reading":               0,
		"dedupeworker_ingest_buffered_bytes":        0,
	} {
		if got := metricValue(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// MaxBufferedBytes bounds the body bytes held at once, whatever the number of requests: one more is answered 503
// busy while the others' bytes are held, and is accepted once they are given back.
func TestReceiverBufferedBytesBound(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) {
		c.MaxBody = 40 << 10
		c.MaxBufferedBytes = 64 << 10
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	// A held request that has sent 36 KiB of a 40 KiB body holds at least its 36 KiB.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) }) // before srv.Close, which waits for the request
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/acme/open", pr)
	req.ContentLength = 40 << 10
	req.Header.Set("X-Id", "held")
	res := make(chan int, 1)
	go func() { // owned by the test: ends with the request
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- 0
			return
		}
		resp.Body.Close()
		res <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(strings.Repeat(" ", 36<<10))); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if v := metricValue(metricsText(t, r), "dedupeworker_ingest_buffered_bytes"); v < 36<<10 {
			return fmt.Errorf("buffered %v bytes", v)
		}
		return nil
	})
	big := strings.Repeat(" ", 30<<10) + "{}"
	if rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "2"), big); rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "busy") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a request over the buffered bytes: %d %q", rec.Code, rec.Body.String())
	}
	_, _ = pw.Write([]byte(strings.Repeat(" ", 4<<10-2) + "{}"))
	_ = pw.Close()
	if got := <-res; got != http.StatusAccepted {
		t.Fatalf("held request: %d", got)
	}
	if rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "2"), big); rec.Code != http.StatusAccepted {
		t.Fatalf("after the held request: %d %q", rec.Code, rec.Body.String())
	}
	if v := metricValue(metricsText(t, r), requests("open", receiver.OutcomeOverloaded)); v != 1 {
		t.Errorf("overloaded counted %v times", v)
	}
}

// A PubAck that arrives after PublishTimeout: INGEST stored the envelope, so the answer must not say it was not
// stored, and it is counted apart from NATS being unavailable. Before the fix: 503 "not stored: JetStream is
// unavailable; retry later", counted as unavailable.
func TestReceiverAckAfterTimeout(t *testing.T) {
	e := startJS(t, true)
	proxy := startProxy(t, strings.TrimPrefix(e.srv.URL(), "nats://"))
	nc := natstest.Connect(t, proxy.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newReceiver(t, &jsEnv{srv: e.srv, nc: nc, js: js}, testPolicy(t), func(c *receiver.Config) { c.PublishTimeout = 300 * time.Millisecond })
	proxy.hold()
	rec := do(r, http.MethodPost, "/hooks/acme/open", hdr("X-Id", "1"), `{"n":1}`)
	proxy.release()
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		strings.Contains(body, "not stored") || !strings.Contains(body, "not confirmed") {
		t.Fatalf("late PubAck answered %d %q", rec.Code, body)
	}
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := e.lastSeq(t); got != 1 {
			return fmt.Errorf("INGEST holds %d envelopes", got)
		}
		return nil
	})
	text := metricsText(t, r)
	if v := metricValue(text, requests("open", receiver.OutcomeUnconfirmed)); v != 1 {
		t.Errorf("unconfirmed counted %v times", v)
	}
	if v := metricValue(text, requests("open", receiver.OutcomeUnavailable)); v != 0 {
		t.Errorf("unavailable counted %v times", v)
	}
}

// MaxHeaderBytes cannot exceed what JetStream stores with the receiver's own headers (a header block of at most
// 65535 bytes, error 10097 beyond). Before the fix up to 1 MiB was accepted, and a delivery with 70 KB of headers
// was answered 503 for ever.
func TestReceiverHeaderLimitFitsJetStream(t *testing.T) {
	e := startJS(t, false)
	long := strings.Repeat("S", 255) // the longest stream name: the longest Nats-Expected-Stream
	e.createStream(t, long, "ingest.>")
	for _, c := range []struct {
		max int
		ok  bool
	}{{receiver.MaxHeaderBytesLimit, true}, {receiver.MaxHeaderBytesLimit + 1, false}, {1 << 16, false}, {1 << 20, false}} {
		_, err := receiver.New(receiver.Config{JetStream: e.js, Policy: testPolicy(t), MaxHeaderBytes: c.max})
		if (err == nil) != c.ok {
			t.Errorf("MaxHeaderBytes %d: err %v", c.max, err)
		}
	}
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) {
		c.MaxHeaderBytes = receiver.MaxHeaderBytesLimit
		c.InputStream = long
	})
	addr := serveOn(t, r)
	// A header block exactly at the limit as the receiver counts it (with Ingest-Verified: false and
	// Nats-Expected-Stream) is stored.
	fixed := len("NATS/1.0\r\n") + len("\r\n") + len("X-Id: 1\r\n") + len("Content-Length: 2\r\n") +
		len("Ingest-Verified: false\r\n") + len("Nats-Expected-Stream: "+long+"\r\n") + len("X-Big: \r\n")
	status, answer := rawPost(t, addr, "/hooks/acme/open", []string{"X-Id: 1", "X-Big: " + strings.Repeat("b", receiver.MaxHeaderBytesLimit-fixed)}, "{}")
	if status != http.StatusAccepted {
		t.Fatalf("headers at the limit: %d %q", status, answer)
	}
	status, answer = rawPost(t, addr, "/hooks/acme/open", []string{"X-Id: 1", "X-Big: " + strings.Repeat("b", receiver.MaxHeaderBytesLimit-fixed+1)}, "{}")
	if status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("headers one byte over the limit: %d %q", status, answer)
	}
}

// Every 431 is counted, Go's own for a header section far over the limit too (source "other": its path is never
// read). Before the fix: a 100 KB header got net/http's stock 431 and headers_too_large stayed 0.
func TestReceiverCountsEvery431(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t), func(c *receiver.Config) { c.MaxHeaderBytes = 2048 })
	addr := serveOn(t, r)
	for _, size := range []int{3000, 10 << 10, 100 << 10, 2 << 20} {
		status, _ := rawPost(t, addr, "/hooks/acme/open", []string{"X-Id: 1", "X-Big: " + strings.Repeat("b", size)}, "{}")
		if status != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%d bytes of headers: %d", size, status)
		}
	}
	text := metricsText(t, r)
	total := metricOr0(text, requests("open", receiver.OutcomeHeadersTooLarge)) + metricOr0(text, requests("other", receiver.OutcomeHeadersTooLarge))
	if total != 4 {
		t.Errorf("headers_too_large counted %v times (open %v, other %v), want 4", total,
			metricOr0(text, requests("open", receiver.OutcomeHeadersTooLarge)), metricOr0(text, requests("other", receiver.OutcomeHeadersTooLarge)))
	}
}

// An error about a verify block never shows a value of it that could be a secret (only short lower-case names such
// as md5 are shown): a secret pasted where a scheme, a header, an algorithm, an encoding or a tolerance goes would
// be printed. Before the fix: `verify: scheme: unknown "whsec_…"`.
func TestReceiverVerifyErrorsShowNoValue(t *testing.T) {
	const pasted = "whsec_PASTED0SECRET0c2VjcmV0"
	for _, c := range []struct{ name, verify string }{
		{"scheme", pasted},
		{"scheme in a block", "{scheme: " + pasted + "}"},
		{"hmac header", "{scheme: hmac, header: \"" + pasted + " x\"}"},
		{"hmac algorithm", "{scheme: hmac, header: X-Sig, algorithm: " + pasted + "}"},
		{"hmac encoding", "{scheme: hmac, header: X-Sig, encoding: " + pasted + "}"},
		{"tolerance", "{scheme: stripe, tolerance: " + pasted + "}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "sources:\n  x: {dedupe: {header: X-Id}, verify: " + c.verify + "}\n"
			src, err := keysLoad(doc)
			if err == nil {
				secrets, serr := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_X=s3cr3t"}, Sources: src.IDs()})
				if serr != nil {
					t.Fatal(serr)
				}
				_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
			}
			if err == nil {
				t.Fatal("no error")
			}
			noSecretIn(t, "the error", err.Error(), pasted, "PASTED0SECRET")
		})
	}
}

// /readyz answers from a result at most a second old: probes do not cost a JetStream request each. Before the fix
// 20 probes made 20 stream lookups.
func TestReceiverReadyzCached(t *testing.T) {
	e := startJS(t, true)
	r, _ := newReceiver(t, e, testPolicy(t))
	apiTotal := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := e.js.AccountInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.API.Total
	}
	before := apiTotal()
	start := time.Now()
	for range 20 {
		if rec := do(r, http.MethodGet, "/readyz", nil, ""); rec.Code != http.StatusOK {
			t.Fatalf("/readyz: %d %q", rec.Code, rec.Body.String())
		}
	}
	// One lookup per second the probes took at most, and the AccountInfo of the first reading.
	allowed := uint64(time.Since(start)/time.Second) + 2
	if n := apiTotal() - before; n > allowed {
		t.Fatalf("20 probes made %d JetStream API requests, want at most %d", n-1, allowed-1)
	}
}

func keysLoad(doc string) (keys.Sources, error) { return keys.LoadSources([]byte(doc)) }
