package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/kvwindow/windowtest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// testSources declares the sources the tests use.
const testSources = `
sources:
  gh:     {dedupe: github}                          # header X-GitHub-Delivery
  orders: {dedupe: {json: id}}
  short:  {dedupe: {header: X-Event-Id, ttl: 1s}}
  legacy: {}
`

// maxJSON is the tests' Extractor.MaxJSONBytes.
const maxJSON = 512

// env is one test's NATS server, client and registry.
type env struct {
	t   testing.TB
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	reg *prometheus.Registry
	log *natstest.Buffer
}

// newEnv starts a server of its own.
func newEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.Run(t)
	return newEnvOn(t, srv, natstest.Connect(t, srv.URL()))
}

// newEnvOn is an env on a connection the test opened (its own options or user) to srv, or to a cluster (srv nil),
// with a registry and a log of its own: several may share a server or a connection.
func newEnvOn(t testing.TB, srv *natstest.Server, nc *nats.Conn) *env {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, nc: nc, js: js, reg: prometheus.NewRegistry(), log: &natstest.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pipeline log:\n%s", e.log.String())
		}
	})
	return e
}

// ackDeniedUsers are the users of a server where "noack" may not acknowledge ($JS.ACK.> is denied: the server
// refuses each ack in an asynchronous permissions error) and "ok" may do anything.
func ackDeniedUsers(o *server.Options) {
	o.Users = []*server.User{
		{Username: "noack", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}},
		{Username: "ok", Password: "pw"},
	}
}

// newAckDeniedEnv is newEnv connected as a user whose every ack the server refuses (ackDeniedUsers).
func newAckDeniedEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.Run(t, natstest.WithOptions(ackDeniedUsers))
	return newEnvOn(t, srv, natstest.Connect(t, srv.URL(), nats.UserInfo("noack", "pw")))
}

// acksAllowed is an env on e's server (started by newAckDeniedEnv) as a user that may acknowledge: the fleet
// started again with its permissions fixed.
func (e *env) acksAllowed() *env {
	e.t.Helper()
	return newEnvOn(e.t, e.srv, natstest.Connect(e.t, e.srv.URL(), nats.UserInfo("ok", "pw")))
}

// createStream creates a stream as an operator would, before the worker provisions.
func (e *env) createStream(sc jetstream.StreamConfig) {
	e.t.Helper()
	if _, err := e.js.CreateStream(ctx(e.t), sc); err != nil {
		e.t.Fatalf("create stream %s: %v", sc.Name, err)
	}
}

// keepingInput creates the input stream with limits retention: it keeps the envelopes the worker acknowledged
// (Provision creates a work-queue stream, which deletes them).
func (e *env) keepingInput() {
	e.t.Helper()
	e.createStream(jetstream.StreamConfig{Name: pipeline.DefaultInputStream, Subjects: []string{"ingest.>"}})
}

// operatorOutput creates the output stream with sc's limits (its name and subjects filled in).
func (e *env) operatorOutput(sc jetstream.StreamConfig) {
	e.t.Helper()
	sc.Name, sc.Subjects = pipeline.DefaultOutputStream, []string{"deduped.>"}
	e.createStream(sc)
}

// shortDupWindow creates the output stream with a duplicate window of d, so a test can outwait it.
func (e *env) shortDupWindow(d time.Duration) {
	e.t.Helper()
	e.operatorOutput(jetstream.StreamConfig{Duplicates: d})
}

// codeWrongLastMsgID is the server's "wrong last msg ID" (nats-server's JSStreamWrongLastMsgIDErrF), which nats.go
// does not name.
const codeWrongLastMsgID jetstream.ErrorCode = 10070

// waitDupWindowPassed waits until the output stream has forgotten the Nats-Msg-Id of m (one of its messages): a
// publish under that id would be stored again, not collapsed. That is the server's clock and its purge of the
// window's ids, not the window's length on the test's clock.
func (e *env) waitDupWindowPassed(m *jetstream.RawStreamMsg, timeout time.Duration) {
	e.t.Helper()
	id := m.Header.Get(jetstream.MsgIDHeader)
	if id == "" {
		e.t.Fatalf("%s message %d has no %s", m.Subject, m.Sequence, jetstream.MsgIDHeader)
	}
	natstest.Eventually(e.t, timeout, func() error {
		held, err := e.dupWindowHolds(m.Subject, id)
		if err == nil && held {
			err = fmt.Errorf("%s still in the output's duplicate window", id)
		}
		return err
	})
}

// dupWindowHolds reports whether the stream that stores subject would collapse a publish under id as a duplicate.
// The probe stores nothing: it also expects a last Nats-Msg-Id the stream never had, which the server checks after
// the duplicate check (nats-server 2.15: a duplicate is answered as such, anything else refused with 10070;
// TestDupWindowProbeStoresNothing holds it to that).
func (e *env) dupWindowHolds(subject, id string) (bool, error) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ack, err := e.js.PublishMsg(c, &nats.Msg{Subject: subject, Header: nats.Header{}},
		jetstream.WithMsgID(id), jetstream.WithExpectLastMsgID("never-stored"))
	switch {
	case jserr.Code(err) == codeWrongLastMsgID:
		return false, nil
	case err != nil:
		return false, err
	case !ack.Duplicate:
		e.t.Fatalf("the probe of %s was stored as message %d", id, ack.Sequence)
	}
	return true, nil
}

// sendRetried publishes n GitHub deliveries with ids prefix0… on ingest.t1.gh through js, each retried until
// stored (a cluster may leave a publish unanswered while it elects a leader).
func sendRetried(t testing.TB, js jetstream.JetStream, prefix string, n int, timeout time.Duration) {
	t.Helper()
	for i := range n {
		natstest.Eventually(t, timeout, func() error {
			_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "ingest.t1.gh",
				Header: hdr("X-GitHub-Delivery", prefix+strconv.Itoa(i))})
			return err
		})
	}
}

func (e *env) sources() keys.Sources {
	s, err := keys.LoadSources([]byte(testSources))
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// provisionRetried creates cfg's streams and consumer through js before a test starts a pipeline on a cluster just
// formed, retried for up to a minute, each attempt bounded to 5s: such a cluster may leave a create unanswered, or
// refuse a replicated stream for a while ("no suitable peers for placement, peer offline": its meta leader places
// only on peers it has had statistics from since their route last came up, and under -race on a loaded machine a
// route comes up again). Run then finds them; it waits on that refusal too, but gives up at once on others.
func provisionRetried(t testing.TB, js jetstream.JetStream, cfg pipeline.Config) {
	t.Helper()
	natstest.Eventually(t, 60*time.Second, func() error {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return pipeline.Provision(c, js, cfg)
	})
}

// config is the tests' configuration: fast status polls, a short ack wait and shutdown timeout.
func (e *env) config(w pipeline.Window) pipeline.Config {
	cfg := pipeline.DefaultConfig()
	cfg.JetStream = e.js
	cfg.Window = w
	cfg.Sources = e.sources()
	cfg.Extractor = keys.Extractor{MaxJSONBytes: maxJSON}
	cfg.AckWait = 5 * time.Second
	cfg.StatusInterval = 100 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.MaxInFlight = 64
	cfg.Logger = slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Metrics = pipeline.NewMetrics(e.reg)
	return cfg
}

// kvWindow is the real window over a KV bucket on the test server.
func (e *env) kvWindow() *kvwindow.Window {
	e.t.Helper()
	cfg := kvwindow.DefaultConfig()
	cfg.Timeout = 2 * time.Second
	// Retried while unavailable (a loaded machine may leave the bucket's create unanswered for the 2s), as the
	// worker retries it at its start.
	var w *kvwindow.Window
	natstest.Eventually(e.t, 30*time.Second, func() error {
		var err error
		w, err = kvwindow.New(ctx(e.t), e.js, cfg)
		if err != nil && (!errors.Is(err, kvwindow.ErrUnavailable) || errors.Is(err, kvwindow.ErrWindowLost)) {
			e.t.Fatal(err)
		}
		return err
	})
	return w
}

// hookWindow wraps a window with hooks the tests use to place an operator's action, a stall or a failure at an
// exact step, and records every claim.
type hookWindow struct {
	pipeline.Window
	mu     sync.Mutex
	claims []kvwindow.Claim
	// beforeClaim runs before the real claim is made.
	beforeClaim func(c kvwindow.Claim)
	// afterClaim runs after the real claim returned, before the pipeline sees the outcome.
	afterClaim func(c kvwindow.Claim, out kvwindow.Outcome)
	// markFails makes MarkPublished fail as an unreachable window would, while it is set.
	markFails atomic.Bool
	marks     atomic.Int64
}

func (w *hookWindow) Claim(ctx context.Context, c kvwindow.Claim, known kvwindow.Known) (kvwindow.Outcome, error) {
	w.mu.Lock()
	w.claims = append(w.claims, c)
	before := w.beforeClaim
	w.mu.Unlock()
	if before != nil {
		before(c)
	}
	out, err := w.Window.Claim(ctx, c, known)
	w.mu.Lock()
	hook := w.afterClaim
	w.mu.Unlock()
	if hook != nil && err == nil {
		hook(c, out)
	}
	return out, err
}

func (w *hookWindow) setAfterClaim(f func(c kvwindow.Claim, out kvwindow.Outcome)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.afterClaim = f
}

// claimsOf returns the claims of key made so far, in order.
func (w *hookWindow) claimsOf(key string) []kvwindow.Claim {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []kvwindow.Claim
	for _, c := range w.claims {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

func (w *hookWindow) MarkPublished(ctx context.Context, c kvwindow.Claim, rev uint64, first time.Time) (uint64, bool, error) {
	w.marks.Add(1)
	if w.markFails.Load() {
		return 0, false, fmt.Errorf("%w: test: mark refused", kvwindow.ErrUnavailable)
	}
	return w.Window.MarkPublished(ctx, c, rev, first)
}

func memWindow() *windowtest.Memory { return windowtest.NewMemory() }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// running is a pipeline started by start.
type running struct {
	p      *pipeline.Pipeline
	cancel context.CancelFunc
	done   chan error
}

// start provisions and runs a pipeline until the test ends (or stop).
func (e *env) start(cfg pipeline.Config) *running {
	e.t.Helper()
	return e.startWith(cfg, nil)
}

// startWith is start with before called on the pipeline before it runs (nil: nothing).
func (e *env) startWith(cfg pipeline.Config, before func(*pipeline.Pipeline)) *running {
	e.t.Helper()
	p, err := pipeline.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if before != nil {
		before(p)
	}
	c, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(c) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	natstest.Eventually(e.t, 10*time.Second, func() error { return p.Ready(context.Background()) })
	return r
}

// stop cancels Run and waits for it (bounded); safe to call twice.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if !ok {
			return
		}
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		close(r.done)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// publish stores one delivery in the input stream and returns its stream sequence.
func (e *env) publish(subject string, hdr nats.Header, body []byte) uint64 {
	e.t.Helper()
	m := &nats.Msg{Subject: subject, Header: hdr, Data: body}
	ack, err := e.js.PublishMsg(ctx(e.t), m)
	if err != nil {
		e.t.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

func hdr(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// drained waits until the consumer has nothing pending and nothing unacknowledged.
func (e *env) drained(timeout time.Duration) {
	e.t.Helper()
	natstest.Eventually(e.t, timeout, func() error {
		info, err := e.consumerInfo()
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("consumer: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		// The consumer's pending count trails a publish by a moment; the ack floor reaching the stream's last
		// sequence is what proves every envelope published so far was handled.
		s, err := e.js.Stream(ctx(e.t), pipeline.DefaultInputStream)
		if err != nil {
			return err
		}
		if last := s.CachedInfo().State.LastSeq; info.AckFloor.Stream < last {
			return fmt.Errorf("consumer: ack floor %d below last sequence %d", info.AckFloor.Stream, last)
		}
		// The server moves the ack floor before the worker sees its ack confirmed and counts the envelope.
		if n := e.metric("dedupeworker_in_flight"); n != 0 {
			return fmt.Errorf("%v envelopes still in flight", n)
		}
		return nil
	})
}

// consumedWithin polls at a steady 5ms (a benchmark times it) until the consumer has nothing pending or
// unacknowledged, failing after timeout.
func (e *env) consumedWithin(timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := e.consumerInfo()
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("consumer not done after %s: %+v %v", timeout, info, err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

func (e *env) consumerInfo() (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, pipeline.DefaultInputStream, pipeline.DefaultConsumer)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil
}

// messages returns every message stored in stream (in order), optionally only those on subjects with prefix.
func (e *env) messages(stream string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	s, err := e.js.Stream(ctx(e.t), stream)
	if err != nil {
		e.t.Fatalf("stream %s: %v", stream, err)
	}
	st := s.CachedInfo().State
	var out []*jetstream.RawStreamMsg
	if st.Msgs == 0 {
		return nil
	}
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx(e.t), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			e.t.Fatalf("stream %s seq %d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}

func (e *env) count(stream string) uint64 {
	e.t.Helper()
	n, err := e.tryCount(stream)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) tryCount(stream string) (uint64, error) {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := e.js.Stream(c, stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.CachedInfo().State.Msgs, nil
}

// waitCount waits until stream holds n messages.
func (e *env) waitCount(stream string, n uint64, timeout time.Duration) {
	e.t.Helper()
	natstest.Eventually(e.t, timeout, func() error {
		got, err := e.tryCount(stream)
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("stream %s holds %d messages, want %d", stream, got, n)
		}
		return nil
	})
}

// metric sums the values of the samples of name whose labels include the given pairs.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// header returns the single value of name in m (case-sensitive), failing on several.
func header(t testing.TB, m *jetstream.RawStreamMsg, name string) string {
	t.Helper()
	vs := m.Header.Values(name)
	if len(vs) > 1 {
		t.Errorf("%s: header %s has %d values %q", m.Subject, name, len(vs), vs)
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// headerNames lists m's header names, sorted.
func headerNames(m *jetstream.RawStreamMsg) []string {
	var names []string
	for k := range m.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// preload publishes n deliveries asynchronously (mk builds the j-th) and waits until all are stored.
func (e *env) preload(n int, mk func(j int) *nats.Msg) {
	e.t.Helper()
	for j := range n {
		for {
			_, err := e.js.PublishMsgAsync(mk(j))
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				e.t.Fatal(err)
			}
			<-e.js.PublishAsyncComplete() // a slow server: let the outstanding ones finish
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		e.t.Fatal("preload: publishes not acknowledged")
	}
	st, err := e.js.Stream(ctx(e.t), pipeline.DefaultInputStream)
	if err != nil {
		e.t.Fatal(err)
	}
	// LastSeq, not Msgs: a work-queue input stream drops what a running pipeline already acknowledged.
	if got := st.CachedInfo().State.LastSeq; got < uint64(n) {
		e.t.Fatalf("preload: input stream stored %d, want at least %d", got, n)
	}
}

// stamp is the input stream's timestamp (unix ns) of the envelope at seq: with seq, its identity.
func (e *env) stamp(seq uint64) int64 {
	e.t.Helper()
	st, err := e.js.Stream(ctx(e.t), pipeline.DefaultInputStream)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetMsg(ctx(e.t), seq)
	if err != nil {
		e.t.Fatalf("input message %d: %v", seq, err)
	}
	return m.Time.UnixNano()
}

// envelopeID is the envelope identity the pipeline puts in its ids: INGEST/<seq>/<stamp>.
func envelopeID(seq uint64, stamp int64) string {
	return fmt.Sprintf("%s/%d/%d", pipeline.DefaultInputStream, seq, stamp)
}

// parseUnkeyedID splits msg/INGEST/<seq>/<stamp>.
func parseUnkeyedID(id string) (seq uint64, stamp int64, ok bool) {
	rest, ok := strings.CutPrefix(id, "msg/"+pipeline.DefaultInputStream+"/")
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(a, 10, 64)
	stamp, err2 := strconv.ParseInt(b, 10, 64)
	return seq, stamp, err1 == nil && err2 == nil
}

// newHandler is the network-free handler over testSources (pipeline.NewHandler: no JetStream, no window).
func newHandler(tb testing.TB) *pipeline.Handler {
	tb.Helper()
	sources, err := keys.LoadSources([]byte(testSources))
	if err != nil {
		tb.Fatal(err)
	}
	h, err := pipeline.NewHandler(pipeline.Config{Sources: sources})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// claimedByDead claims key (tenant t1, source gh, an hour's TTL) in w for the envelope at seq of INGEST, as a
// delivery of it (d; zero: the first of the consumer as the window reads it) that died before doing more, and
// returns the claim's revision.
func (e *env) claimedByDead(w pipeline.Window, key string, seq uint64, d kvwindow.Delivery) uint64 {
	e.t.Helper()
	d.Count = max(d.Count, 1)
	out, err := w.Claim(ctx(e.t), kvwindow.Claim{Tenant: "t1", Source: "gh", Key: key, TTL: time.Hour,
		Claimant: kvwindow.Claimant{Seq: seq, Stamp: e.stamp(seq)}, Delivery: d}, kvwindow.Known{})
	if err != nil || out.Status != kvwindow.Won {
		e.t.Fatalf("claim %s: %v %v", key, out, err)
	}
	return out.Revision
}
