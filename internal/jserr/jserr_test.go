package jserr_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// serverErrors provokes each answer the worker classifies from a real nats-server and returns them by name.
// conns says which connection each came from: a live one, or for "connection closed" the closed one.
func serverErrors(t *testing.T) (errs map[string]error, conns map[string]*nats.Conn) {
	t.Helper()
	// A file store refuses a record over 32 MiB (10077, "message too large"); the server must let it through.
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) { o.MaxPayload = 33 << 20 }))
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mustStream := func(cfg jetstream.StreamConfig) jetstream.Stream {
		s, err := js.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
		return s
	}
	s := mustStream(jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgSize: 1024})
	mustStream(jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
	mustStream(jetstream.StreamConfig{Name: "FILE", Subjects: []string{"file.>"}, Storage: jetstream.FileStorage})
	if _, err := js.Publish(ctx, "s.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	_, got["wrong last sequence"] = js.Publish(ctx, "s.a", []byte("y"), jetstream.WithExpectLastSequencePerSubject(5))
	_, got["message over the stream's maximum"] = js.Publish(ctx, "s.b", make([]byte, 2048))
	big := nats.NewMsg("s.c")
	big.Header.Set("X-Big", strings.Repeat("h", 70_000))
	_, got["header block over 64 KiB"] = js.PublishMsg(ctx, big)
	_, got["record over the file store's limit"] = js.Publish(ctx, "file.a", make([]byte, 32<<20+1))
	_, got["payload over the connection's maximum"] = js.Publish(ctx, "s.d", make([]byte, nc.MaxPayload()+1))
	_, got["message not found"] = s.GetMsg(ctx, 999)
	_, got["no stream captures the subject"] = js.Publish(ctx, "nowhere.a", []byte("x"))
	_, got["stream name in use, other config"] = js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"other.>"}})
	if _, err := js.CreateConsumer(ctx, "WQ", jetstream.ConsumerConfig{Durable: "a", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	_, got["second consumer on a work queue"] = js.CreateConsumer(ctx, "WQ", jetstream.ConsumerConfig{Durable: "b", AckPolicy: jetstream.AckExplicitPolicy})
	if _, err := nc.Subscribe("silent", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	_, got["no answer in time"] = nc.RequestWithContext(short, "silent", nil)
	cancelShort()
	_, got["no responders"] = nc.Request("nobody.listens", nil, time.Second)

	closed := natstest.Connect(t, srv.URL())
	closed.Close()
	got["connection closed"] = closed.Publish("s.a", nil)
	_, got["no server at the address"] = nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)), nats.Timeout(time.Second))
	conns = map[string]*nats.Conn{}
	for name := range got {
		conns[name] = nc
	}
	conns["connection closed"] = closed
	return got, conns
}

// TestClassify: every category, for errors a real nats-server gave (through nats.go's own calls).
func TestClassify(t *testing.T) {
	errs, conns := serverErrors(t)
	type want struct{ refused, tooLarge, wqTaken, notFound, conflict, notAnswering, unanswered, offline, unreachable bool }
	for _, tc := range []struct {
		name string
		want want
	}{
		{"wrong last sequence", want{refused: true, conflict: true}},
		{"message over the stream's maximum", want{refused: true, tooLarge: true}},
		{"header block over 64 KiB", want{refused: true, tooLarge: true}},
		// 10077 "message too large" is a 503: refused for good all the same, by its text (no code carries it).
		{"record over the file store's limit", want{tooLarge: true, notAnswering: true}},
		{"payload over the connection's maximum", want{tooLarge: true}},
		{"message not found", want{refused: true, notFound: true}},
		{"no stream captures the subject", want{notAnswering: true, unanswered: true}},
		{"stream name in use, other config", want{refused: true}},
		{"second consumer on a work queue", want{refused: true, wqTaken: true}},
		{"no answer in time", want{notAnswering: true, unanswered: true}},
		{"no responders", want{notAnswering: true, unanswered: true}},
		{"connection closed", want{offline: true}},
		{"no server at the address", want{unreachable: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := errs[tc.name]
			if err == nil {
				t.Fatal("the server did not fail")
			}
			_, conflict := jserr.WrongLastSeq(err)
			got := want{
				refused: jserr.Refused(err), tooLarge: jserr.TooLarge(err), wqTaken: jserr.WorkQueueTaken(err),
				notFound: jserr.MsgNotFound(err), conflict: conflict, notAnswering: jserr.NotAnswering(err),
				unanswered: jserr.Unanswered(err), offline: jserr.Offline(conns[tc.name], err),
				unreachable: jserr.Unreachable(err),
			}
			if got != tc.want {
				t.Errorf("%v (code %d):\n got %+v\nwant %+v", err, jserr.Code(err), got, tc.want)
			}
		})
	}
	t.Run("last sequence from the server's text", func(t *testing.T) { checkLastSeq(t, errs) })
}

// The subject's last sequence is read from the server's own 10071 text, and nothing is read from another answer.
func checkLastSeq(t *testing.T, errs map[string]error) {
	if n, ok := jserr.LastSeq(errs["wrong last sequence"]); !ok || n != 1 {
		t.Errorf("LastSeq(%v) = %d, %v; want 1 (the subject's only message)", errs["wrong last sequence"], n, ok)
	}
	for name, err := range errs {
		if name == "wrong last sequence" {
			continue
		}
		if n, ok := jserr.LastSeq(err); ok {
			t.Errorf("LastSeq(%s: %v) = %d, want none", name, err, n)
		}
	}
}

// What a failed request says about its work: sent without an answer (none in time, the caller gone, the
// connection lost under it), it may have been done; refused, or with nothing to take it, it was not. Used for a
// replayed dead letter's publish and the receiver's guard claim.
func TestMayHaveLanded(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("claim: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{nats.ErrConnectionClosed, true},
		{nats.ErrDisconnected, true},
		{nats.ErrConnectionReconnecting, true},
		{jetstream.ErrNoStreamResponse, false},
		{nats.ErrNoResponders, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10060, Description: "expected stream does not match"}, false},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, false},
		{nats.ErrMaxPayload, false},
	} {
		if got := jserr.MayHaveLanded(tc.err); got != tc.want {
			t.Errorf("MayHaveLanded(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
