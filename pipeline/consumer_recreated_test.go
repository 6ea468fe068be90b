package pipeline_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// cutProxy forwards TCP connections to a NATS server until it is cut: then every connection through it is closed
// and new ones are refused until it is restored.
type cutProxy struct {
	ln    net.Listener
	down  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close(); _ = c.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = s.Close(); _ = c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore() { p.down.Store(false) }

// A consumer deleted while the worker is disconnected: no pull request waits on the server, so no "409 Consumer
// Deleted" ever comes, and after the reconnect every pull is answered "503 no responders". The status poll reads
// the consumer as not found and the worker binds again, which (with Provision) creates the consumer again.
func TestConsumerDeletedWhileDisconnectedIsCreatedAgain(t *testing.T) {
	for _, deleted := range []string{"consumer", "input stream"} {
		t.Run(deleted, func(t *testing.T) {
			e := newEnv(t)
			px := newCutProxy(t, strings.TrimPrefix(e.srv.URL(), "nats://"))
			nc := natstest.Connect(t, px.url(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
			wjs, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.config(memWindow())
			cfg.JetStream = wjs
			r := e.start(cfg)
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "a"), []byte("k"))
			e.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)

			px.cut()
			natstest.Eventually(t, 10*time.Second, func() error {
				if nc.IsConnected() {
					return errors.New("still connected")
				}
				return nil
			})
			if deleted == "consumer" {
				err = e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer)
			} else {
				err = e.js.DeleteStream(ctx(t), pipeline.DefaultInputStream)
			}
			if err != nil {
				t.Fatal(err)
			}
			px.restore()
			natstest.Eventually(t, 10*time.Second, func() error {
				if _, err := e.js.Consumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
					return fmt.Errorf("consumer not created again: %w (ready: %v)", err, r.p.Ready(ctx(t)))
				}
				return nil
			})
			e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "b"), []byte("k2"))
			e.waitCount(pipeline.DefaultOutputStream, 2, 15*time.Second)
			natstest.Eventually(t, 10*time.Second, func() error { return r.p.Ready(ctx(t)) })
		})
	}
}

// A consumer re-created (or edited) by an operator under the running worker with a filter that leaves out some
// tenants: the worker refuses to bind it (their envelopes would sit in the work-queue stream for ever while it says
// ready) and says not ready, naming the filter.
func TestConsumerNarrowedUnderRunningWorkerRefused(t *testing.T) {
	for _, how := range []string{"re-created", "edited"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config(memWindow())
			if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
				t.Fatal(err)
			}
			cfg.Provision = false // the operator's consumer, not one the worker creates in the meantime
			r := e.start(cfg)
			if how == "re-created" {
				if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
					t.Fatal(err)
				}
				if _, err := e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, jetstream.ConsumerConfig{
					Durable: pipeline.DefaultConsumer, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ingest.t1.>",
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				info, err := e.consumerInfo()
				if err != nil {
					t.Fatal(err)
				}
				upd := info.Config
				upd.FilterSubject = "ingest.t1.>"
				if _, err := e.js.UpdateConsumer(ctx(t), pipeline.DefaultInputStream, upd); err != nil {
					t.Fatal(err)
				}
			}
			e.publish("ingest.t2.gh", hdr("X-GitHub-Delivery", "t2"), []byte("k"))
			r.waitUnreadyNaming(t, 10*time.Second, `"ingest.t1.>"`)
			if got := e.metric("dedupeworker_ready"); got != 0 {
				t.Fatalf("dedupeworker_ready %v, want 0", got)
			}
		})
	}
}

// At start, Provision refuses an existing consumer whose filter leaves out some tenants or sources.
func TestProvisionRefusesNarrowFilter(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, pipeline.DefaultConsumer); err != nil {
		t.Fatal(err)
	}
	for i, filters := range [][]string{{"ingest.acme.>"}, {"ingest.*.gh", "ingest.*.orders"}} {
		name := fmt.Sprint("narrow-", i)
		cc := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: filters}
		if _, err := e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, cc); err != nil {
			t.Fatal(err)
		}
		cfg.Consumer = name
		err := pipeline.Provision(ctx(t), e.js, cfg)
		if !errors.Is(err, pipeline.ErrIncompatible) || !strings.Contains(err.Error(), filters[0]) {
			t.Errorf("Provision with filters %q = %v, want ErrIncompatible naming the filter", filters, err)
		}
		if err := e.js.DeleteConsumer(ctx(t), pipeline.DefaultInputStream, name); err != nil {
			t.Fatal(err)
		}
	}
	// A filter that covers every tenant and source is fine.
	cc := jetstream.ConsumerConfig{Durable: "wide", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ingest.*.*"}
	if _, err := e.js.CreateConsumer(ctx(t), pipeline.DefaultInputStream, cc); err != nil {
		t.Fatal(err)
	}
	cfg.Consumer = "wide"
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatalf("Provision with filter ingest.*.*: %v", err)
	}
}
