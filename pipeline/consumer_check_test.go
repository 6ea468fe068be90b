package pipeline_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestCheckConsumer decides, from an existing consumer's configuration alone, whether it can serve the pipeline
// and what about it deserves a warning: the same decision for the consumer Provision finds and for one an operator
// creates again under the running worker (bound without Provision).
func TestCheckConsumer(t *testing.T) {
	cfg := pipeline.DefaultConfig()
	cfg.AckWait = 30 * time.Second
	cfg.MaxInFlight = 64
	good := jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
	}
	with := func(f func(c *jetstream.ConsumerConfig)) jetstream.ConsumerConfig {
		c := good
		f(&c)
		return c
	}
	const filtered = "filters on"
	for _, tc := range []struct {
		name    string
		got     jetstream.ConsumerConfig
		refused string // in the error, which wraps ErrIncompatible ("": accepted)
		warned  string // in one warning ("": none)
	}{
		{name: "as created", got: good},
		{name: "push", got: with(func(c *jetstream.ConsumerConfig) { c.DeliverSubject = "push.here" }), refused: "push consumer"},
		{name: "ack none", got: with(func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckNonePolicy }), refused: "explicit"},
		{name: "headers only", got: with(func(c *jetstream.ConsumerConfig) { c.HeadersOnly = true }), refused: "headers only"},
		{name: "filter leaving tenants out", got: with(func(c *jetstream.ConsumerConfig) { c.FilterSubject = "ingest.acme.*" }),
			refused: "does not cover"},
		{name: "filters leaving tenants out", got: with(func(c *jetstream.ConsumerConfig) { c.FilterSubjects = []string{"ingest.acme.*", "ingest.beta.*"} }),
			refused: "does not cover"},
		// The filter Provision itself creates when the stream stores subjects outside the prefix: nothing to do about it.
		{name: "filter Provision creates", got: with(func(c *jetstream.ConsumerConfig) { c.FilterSubject = "ingest.>" })},
		// An operator's: Provision never sets FilterSubjects.
		{name: "filters on the prefix", got: with(func(c *jetstream.ConsumerConfig) { c.FilterSubjects = []string{"ingest.>"} }), warned: filtered},
		{name: "filters covering", got: with(func(c *jetstream.ConsumerConfig) { c.FilterSubjects = []string{"ingest.*.*", "other.>"} }), warned: filtered},
		{name: "delivery limit", got: with(func(c *jetstream.ConsumerConfig) { c.MaxDeliver = 5 }), warned: "delivery limit"},
		{name: "other ack wait", got: with(func(c *jetstream.ConsumerConfig) { c.AckWait = time.Minute }), warned: "ack wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warns, err := pipeline.CheckConsumer(cfg, tc.got)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && err == nil:
				t.Fatalf("accepted (warnings %q), want refused: %s", warns, tc.refused)
			case tc.refused != "" && (!errors.Is(err, pipeline.ErrIncompatible) || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("refused with %v, want ErrIncompatible saying %q", err, tc.refused)
			}
			if err != nil {
				return
			}
			var hit []string
			for _, w := range warns {
				if tc.warned != "" && strings.Contains(w, tc.warned) {
					hit = append(hit, w)
				}
			}
			if tc.warned == "" && len(warns) > 0 {
				t.Fatalf("warnings %q, want none", warns)
			}
			if tc.warned != "" && len(hit) != 1 {
				t.Fatalf("warnings %q, want one saying %q", warns, tc.warned)
			}
			if tc.warned != filtered {
				for _, w := range warns {
					if strings.Contains(w, filtered) {
						t.Fatalf("warning %q about a consumer without a filter", w)
					}
				}
			}
		})
	}
}
