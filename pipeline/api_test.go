package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

func TestNewValidates(t *testing.T) {
	e := newEnv(t)
	base := func() pipeline.Config { return e.config(memWindow()) }
	cases := []struct {
		name string
		mod  func(*pipeline.Config)
		want string
	}{
		{"no jetstream", func(c *pipeline.Config) { c.JetStream = nil }, "pipeline: JetStream: is required"},
		{"no window", func(c *pipeline.Config) { c.Window = nil }, "pipeline: Window: is required"},
		{"bad stream", func(c *pipeline.Config) { c.OutputStream = "DE.DUPED" }, "pipeline: OutputStream:"},
		{"same streams", func(c *pipeline.Config) { c.DLQStream = c.InputStream }, "pipeline: InputStream, OutputStream and DLQStream must differ"},
		{"bad consumer", func(c *pipeline.Config) { c.Consumer = "a b" }, "pipeline: Consumer:"},
		{"wildcard prefix", func(c *pipeline.Config) { c.InputPrefix = "ingest.>" }, "pipeline: InputPrefix:"},
		{"empty token", func(c *pipeline.Config) { c.OutputPrefix = "a..b" }, "pipeline: OutputPrefix:"},
		// The worker's settings and the receiver take the same names and prefixes: [A-Za-z0-9_-] tokens.
		{"stream beyond the token characters", func(c *pipeline.Config) { c.InputStream = "INGÉST" }, "pipeline: InputStream:"},
		{"prefix beyond the token characters", func(c *pipeline.Config) { c.DLQPrefix = "dead/letters" }, "pipeline: DLQPrefix:"},
		{"overlap", func(c *pipeline.Config) { c.OutputPrefix = "ingest.out" }, `pipeline: OutputPrefix: "ingest.out" overlaps InputPrefix "ingest"`},
		{"duplicates overlap", func(c *pipeline.Config) { c.DuplicatesPrefix = "deduped" }, "pipeline: DuplicatesPrefix:"},
		{"ttl", func(c *pipeline.Config) { c.DefaultTTL = time.Millisecond }, "pipeline: DefaultTTL:"},
		{"replicas", func(c *pipeline.Config) { c.Replicas = 7 }, "pipeline: Replicas:"},
		{"in flight", func(c *pipeline.Config) { c.MaxInFlight = -1 }, "pipeline: MaxInFlight:"},
		{"ack wait", func(c *pipeline.Config) { c.AckWait = time.Millisecond }, "pipeline: AckWait:"},
	}
	for _, c := range cases {
		cfg := base()
		c.mod(&cfg)
		_, err := pipeline.New(cfg)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error starting with %q", c.name, err, c.want)
		}
	}
	// Zero values take the defaults.
	if _, err := pipeline.New(pipeline.Config{JetStream: e.js, Window: memWindow()}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
	d := pipeline.DefaultConfig()
	if !d.Provision || d.InputStream != "INGEST" || d.OutputPrefix != "deduped" || d.DLQPrefix != "dedupe.dlq" ||
		d.Consumer != "dedupeworker" || d.MaxInFlight != 1024 || d.AckWait != 30*time.Second ||
		d.DefaultTTL != 72*time.Hour || d.ShutdownTimeout != 30*time.Second || d.ForwardWhenWindowDown {
		t.Errorf("DefaultConfig = %+v", d)
	}
}

func TestProvision(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.DuplicatesPrefix = "dupes"
	for range 2 { // idempotent
		if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.js.Stream(ctx(t), "DEDUPED")
	if err != nil {
		t.Fatal(err)
	}
	oc := out.CachedInfo().Config
	if oc.Duplicates != 2*time.Minute || len(oc.Subjects) != 2 || oc.Storage != jetstream.FileStorage {
		t.Errorf("DEDUPED: duplicates %s, subjects %q, storage %s", oc.Duplicates, oc.Subjects, oc.Storage)
	}
	c, err := e.js.Consumer(ctx(t), "INGEST", "dedupeworker")
	if err != nil {
		t.Fatal(err)
	}
	cc := c.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.MaxDeliver != -1 || cc.AckWait != cfg.AckWait ||
		cc.MaxAckPending < cfg.MaxInFlight {
		t.Errorf("consumer config %+v", cc)
	}
}

func TestProvisionRefusesIncompatible(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	e.createStream(jetstream.StreamConfig{Name: "DEDUPED", Subjects: []string{"elsewhere.>"}})
	err := pipeline.Provision(ctx(t), e.js, cfg)
	if !errors.Is(err, pipeline.ErrIncompatible) || !strings.Contains(err.Error(), "deduped.*.*") {
		t.Errorf("Provision = %v, want ErrIncompatible naming deduped.*.*", err)
	}
	s, _ := e.js.Stream(ctx(t), "DEDUPED")
	if got := s.CachedInfo().Config.Subjects; len(got) != 1 || got[0] != "elsewhere.>" {
		t.Errorf("Provision changed the stream: %q", got)
	}
	// Run reports it rather than retrying forever.
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx(t)); !errors.Is(err, pipeline.ErrIncompatible) {
		t.Errorf("Run = %v", err)
	}

	e2 := newEnv(t)
	e2.keepingInput()
	if _, err := e2.js.CreateConsumer(ctx(t), "INGEST", jetstream.ConsumerConfig{Durable: "dedupeworker", AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	if err := pipeline.Provision(ctx(t), e2.js, e2.config(memWindow())); !errors.Is(err, pipeline.ErrIncompatible) {
		t.Errorf("Provision with an ack-none consumer = %v", err)
	}
}

func TestReadyAndRunOnce(t *testing.T) {
	e := newEnv(t)
	p, err := pipeline.New(e.config(memWindow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(context.Background()); err == nil {
		t.Error("Ready before Run")
	}
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(c) }()
	natstest.Eventually(t, 10*time.Second, func() error { return p.Ready(context.Background()) })
	if err := p.Run(context.Background()); err == nil {
		t.Error("a second concurrent Run was accepted")
	}
	cancel()
	cancel() // idempotent
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := p.Ready(context.Background()); err == nil {
		t.Error("Ready after Run returned")
	}
}

// TestRunWithoutProvisionWaitsForConsumer: without Provision, Run binds once the consumer exists.
func TestRunWithoutProvisionWaitsForConsumer(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.Provision = false
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(c) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// Run has looked for the consumer, found none, and goes on waiting (it would have created it by now).
	natstest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(e.log.String(), "pipeline: cannot consume; retrying") {
			return errors.New("Run has not looked for the consumer yet")
		}
		return nil
	})
	if err := p.Ready(context.Background()); err == nil {
		t.Fatal("ready without a consumer")
	}
	if _, err := e.js.Stream(ctx(t), "INGEST"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Run without Provision created the stream: %v", err)
	}
	cfg.Provision = true
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() error { return p.Ready(context.Background()) })
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "p-1"), nil)
	e.waitCount("DEDUPED", 1, 10*time.Second)
}
