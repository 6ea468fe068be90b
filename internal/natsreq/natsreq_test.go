package natsreq_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natsreq"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

func newMux(t *testing.T) (*nats.Conn, *natsreq.Mux) {
	t.Helper()
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv.ClientURL())
	m, err := natsreq.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return nc, m
}

func TestRequestAnswers(t *testing.T) {
	nc, m := newMux(t)
	if _, err := nc.Subscribe("echo", func(r *nats.Msg) { _ = r.Respond(append([]byte("re:"), r.Data...)) }); err != nil {
		t.Fatal(err)
	}
	// Many requests at once, each answered with its own data: no answer reaches another request.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 50 {
				want := strings.Repeat("x", g) + string(rune('a'+i%26))
				a, err := m.Request(context.Background(), &nats.Msg{Subject: "echo", Data: []byte(want)}, 5*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if string(a.Data) != "re:"+want {
					errs <- errors.New("answer " + string(a.Data) + " to request " + want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestRequestNoResponders(t *testing.T) {
	_, m := newMux(t)
	_, err := m.Request(context.Background(), &nats.Msg{Subject: "nobody.here"}, 5*time.Second)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("err = %v, want nats.ErrNoResponders", err)
	}
}

// A late answer to a request that timed out must never be taken for the answer to the next request.
func TestLateAnswerIsNotTheNextOnesAnswer(t *testing.T) {
	nc, m := newMux(t)
	release := make(chan struct{})
	var held []*nats.Msg
	var mu sync.Mutex
	if _, err := nc.Subscribe("slow", func(r *nats.Msg) {
		mu.Lock()
		held = append(held, r)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("fast", func(r *nats.Msg) {
		<-release
		_ = r.Respond([]byte("fast"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Request(context.Background(), &nats.Msg{Subject: "slow"}, 50*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("err = %v, want nats.ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Request(ctx, &nats.Msg{Subject: "slow"}, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
	// Answer the timed-out request now, then ask again: the answer must be the new request's.
	natstest.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(held) == 0 {
			return errors.New("slow request not received")
		}
		return nil
	})
	mu.Lock()
	_ = held[0].Respond([]byte("late"))
	mu.Unlock()
	close(release)
	a, err := m.Request(context.Background(), &nats.Msg{Subject: "fast"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Data) != "fast" {
		t.Fatalf("answer %q, want %q", a.Data, "fast")
	}
}

// The acknowledgements of a real server, parsed here, say what the jetstream package says of them.
func TestParsePubAckFromServer(t *testing.T) {
	nc, m := newMux(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	publish := func(h nats.Header) (natsreq.PubAck, error) {
		a, err := m.Request(ctx, &nats.Msg{Subject: "s.k", Header: h, Data: []byte("v")}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return natsreq.ParsePubAck(a.Data)
	}
	pa, err := publish(nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}})
	if err != nil || string(pa.Stream) != "S" || pa.Sequence != 1 || pa.Duplicate {
		t.Fatalf("first publish: %+v, %v", pa, err)
	}
	_, err = publish(nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.Code != 400 || !strings.Contains(apiErr.Description, "wrong last sequence: 1") {
		t.Fatalf("second create: %v (%#v)", err, apiErr)
	}
	pa, err = publish(nats.Header{jetstream.MsgIDHeader: {"id"}})
	if err != nil || pa.Sequence != 2 {
		t.Fatalf("msg id: %+v, %v", pa, err)
	}
	pa, err = publish(nats.Header{jetstream.MsgIDHeader: {"id"}})
	if err != nil || !pa.Duplicate || pa.Sequence != 2 {
		t.Fatalf("duplicate msg id: %+v, %v", pa, err)
	}
}

func TestParsePubAck(t *testing.T) {
	for _, tc := range []struct {
		in      string
		stream  string
		seq     uint64
		dup     bool
		errCode jetstream.ErrorCode
		invalid bool
	}{
		{in: `{"stream":"KV_w","seq":12}`, stream: "KV_w", seq: 12},
		{in: ` {"stream":"S","domain":"hub","seq":3,"duplicate":true,"val":{"a":[1,2]}} `, stream: "S", seq: 3, dup: true},
		{in: `{"stream":"S\u0031","seq":0}`, stream: "S1", seq: 0},
		{in: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"S","seq":0}`, errCode: 10071},
		{in: `{"error":{"code":503,"err_code":10077,"description":"resource limits exceeded for account","x":[]}}`, errCode: 10077},
		{in: ``, invalid: true},
		{in: `[]`, invalid: true},
		{in: `{"stream":"S"}`, invalid: true},
		{in: `{"seq":1}`, invalid: true},
		{in: `{"stream":"S","seq":-1}`, invalid: true},
		{in: `{"stream":"S","seq":1.5}`, invalid: true},
		{in: `{"stream":"S","seq":1}x`, invalid: true},
		{in: `{"stream":"S","seq":99999999999999999999}`, invalid: true},
		{in: `{"stream":"S","seq":1`, invalid: true},
	} {
		pa, err := natsreq.ParsePubAck([]byte(tc.in))
		var apiErr *jetstream.APIError
		switch {
		case tc.invalid:
			if !errors.Is(err, natsreq.ErrInvalidPubAck) {
				t.Errorf("%s: err = %v, want ErrInvalidPubAck", tc.in, err)
			}
		case tc.errCode != 0:
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.errCode {
				t.Errorf("%s: err = %v, want API error %d", tc.in, err, tc.errCode)
			}
		case err != nil || string(pa.Stream) != tc.stream || pa.Sequence != tc.seq || pa.Duplicate != tc.dup:
			t.Errorf("%s: %+v (stream %q), %v", tc.in, pa, pa.Stream, err)
		}
	}
}

func TestParsePubAckAllocations(t *testing.T) {
	in := []byte(`{"stream":"KV_dedupe-window","seq":123456,"duplicate":false}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = natsreq.ParsePubAck(in) }); n != 0 {
		t.Fatalf("%v allocations per acknowledgement, want 0", n)
	}
}

func FuzzParsePubAck(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":1}`, `{"error":{"code":400,"err_code":10071,"description":"d"}}`,
		`{"stream":"S","seq":1,"duplicate":true}`, `{"stream":"a\"b","seq":0,"x":{"y":[null]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pa, err := natsreq.ParsePubAck(data)
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			if len(pa.Stream) == 0 {
				t.Fatalf("accepted %q without a stream", data)
			}
		case errors.As(err, &apiErr), errors.Is(err, natsreq.ErrInvalidPubAck):
		default:
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
	})
}

// Requests that time out (an outage that swallows every answer) reuse their slots under new reply subjects, and
// the answers that arrive late for the old subjects are dropped, never taken for a later request's.
func TestTimedOutSlotsAreReused(t *testing.T) {
	nc, m := newMux(t)
	var mu sync.Mutex
	var held []*nats.Msg
	if _, err := nc.Subscribe("swallow", func(r *nats.Msg) { mu.Lock(); held = append(held, r); mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("echo", func(r *nats.Msg) { _ = r.Respond(r.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := m.Request(context.Background(), &nats.Msg{Subject: "swallow"}, time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("err = %v, want nats.ErrTimeout", err)
		}
	}
	if n := natsreq.Slots(m); n != 1 {
		t.Fatalf("%d slots after 50 timeouts one at a time, want 1", n)
	}
	natstest.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(held) < 50 {
			return errors.New("requests not all received")
		}
		return nil
	})
	mu.Lock()
	for _, r := range held {
		_ = r.Respond([]byte("late"))
	}
	mu.Unlock()
	for i := range 20 {
		want := strconv.Itoa(i)
		a, err := m.Request(context.Background(), &nats.Msg{Subject: "echo", Data: []byte(want)}, 5*time.Second)
		if err != nil || string(a.Data) != want {
			t.Fatalf("request %d after late answers: %q, %v", i, a.Data, err)
		}
	}
}

// A request answered twice (a responder that answers again, a stream whose leader changed between storing the
// message and answering it): the second answer belongs to no later request, whether it arrives while the slot is
// free or while its next request waits.
func TestSecondAnswerIsNotTheNextOnesAnswer(t *testing.T) {
	nc, m := newMux(t)
	var mu sync.Mutex
	var first *nats.Msg
	if _, err := nc.Subscribe("twice", func(r *nats.Msg) {
		mu.Lock()
		first = r
		mu.Unlock()
		_ = r.Respond([]byte("first"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("echo", func(r *nats.Msg) { _ = r.Respond(r.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a, err := m.Request(context.Background(), &nats.Msg{Subject: "twice"}, 5*time.Second)
		if err != nil || string(a.Data) != "first" {
			t.Fatalf("round %d: answer %v, %v", i, a, err)
		}
		// The second answer reaches the answer subscription before the next request is sent (the flush's PONG
		// follows it on the connection, and the subscription hands its messages over in order).
		mu.Lock()
		_ = nc.Publish(first.Reply, []byte("again"))
		mu.Unlock()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		want := strconv.Itoa(i)
		a, err = m.Request(context.Background(), &nats.Msg{Subject: "echo", Data: []byte(want)}, 5*time.Second)
		if err != nil || string(a.Data) != want {
			t.Fatalf("round %d: the next request's answer is %q (%v), want %q", i, a.Data, err, want)
		}
	}
}

// A publish nobody stores (no stream captures its subject) is tried again twice, then is the jetstream package's
// ErrNoStreamResponse; one that a stream stores returns its acknowledgement.
func TestPublish(t *testing.T) {
	nc, m := newMux(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Publish(ctx, &nats.Msg{Subject: "nowhere.x"}, 5*time.Second); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: err = %v, want ErrNoStreamResponse", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p.>"}}); err != nil {
		t.Fatal(err)
	}
	pa, err := m.Publish(ctx, &nats.Msg{Subject: "p.x", Data: []byte("v")}, 5*time.Second)
	if err != nil || string(pa.Stream) != "P" || pa.Sequence != 1 {
		t.Fatalf("stored: %+v, %v", pa, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Publish(cctx, &nats.Msg{Subject: "p.x"}, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

// A reply subject is a slice of a block of 256: a slot left idle after a burst must not keep its last subject (and
// so its block) alive, nor may the caller's message.
func TestIdleSlotsHoldNoSubject(t *testing.T) {
	nc, m := newMux(t)
	if _, err := nc.Subscribe("echo", func(r *nats.Msg) { _ = r.Respond(r.Data) }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for range 300 {
		wg.Go(func() {
			msg := &nats.Msg{Subject: "echo", Data: []byte("x")}
			if _, err := m.Request(context.Background(), msg, 5*time.Second); err != nil {
				errs <- err
				return
			}
			if msg.Reply != "" {
				errs <- errors.New("the request's message still holds its reply subject " + msg.Reply)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	free, holding := natsreq.Idle(m)
	if free != natsreq.Slots(m) || holding != 0 {
		t.Fatalf("after the burst: %d of %d slots free, %d still holding a reply subject; want all free, none holding",
			free, natsreq.Slots(m), holding)
	}
}
