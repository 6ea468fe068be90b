package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Dead letters the dead-letter stream does not store make the pipeline unready, as failing output publishes do:
// the envelopes are handed back for ever, and an operator must hear of it.
func TestDeadLetterFailuresUnready(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	cfg.Provision = false
	if err := pipeline.Provision(ctx(t), e.js, cfg); err != nil {
		t.Fatal(err)
	}
	r := e.start(cfg)
	if err := e.js.DeleteStream(ctx(t), pipeline.DefaultDLQStream); err != nil {
		t.Fatal(err)
	}
	e.publish("ingest.bad@tenant.gh", nil, []byte("x"))
	natstest.Eventually(t, 15*time.Second, func() error {
		err := r.p.Ready(ctx(t))
		if err == nil || !strings.Contains(err.Error(), pipeline.DefaultDLQStream) {
			return fmt.Errorf("ready = %v after %v dead-letter NAKs, want not ready naming %s", err,
				e.metric("dedupeworker_naks_total", "reason", pipeline.NakDeadLetter), pipeline.DefaultDLQStream)
		}
		return nil
	})
}

// With Provision, a dead-letter or output stream deleted under the running worker is created again as soon as a
// publish finds it missing, and what waited for it goes through.
func TestMissingStreamCreatedAgain(t *testing.T) {
	for _, c := range []struct{ stream, subject string }{
		{pipeline.DefaultDLQStream, "ingest.bad@tenant.gh"},
		{pipeline.DefaultOutputStream, "ingest.t1.legacy"},
	} {
		t.Run(c.stream, func(t *testing.T) {
			e := newEnv(t)
			r := e.start(e.config(memWindow()))
			if err := e.js.DeleteStream(ctx(t), c.stream); err != nil {
				t.Fatal(err)
			}
			e.publish(c.subject, nil, []byte("x"))
			natstest.Eventually(t, 15*time.Second, func() error {
				if n, err := e.tryCount(c.stream); err != nil || n != 1 {
					return fmt.Errorf("%s: %d messages, %v (ready: %v)", c.stream, n, err, r.p.Ready(ctx(t)))
				}
				return nil
			})
			e.drained(10 * time.Second)
			natstest.Eventually(t, 15*time.Second, func() error { return r.p.Ready(ctx(t)) })
		})
	}
}

// With Provision, an output or dead-letter stream deleted while nothing is sent is found missing by the status
// poll, which has it created again: the idle worker is ready again within seconds. Before, the poll reported the
// missing stream's leader as not answering, and only a publish that failed had the stream created again.
func TestMissingStreamCreatedAgainIdle(t *testing.T) {
	for _, stream := range []string{pipeline.DefaultOutputStream, pipeline.DefaultDLQStream} {
		t.Run(stream, func(t *testing.T) {
			e := newEnv(t)
			r := e.start(e.config(memWindow()))
			if err := e.js.DeleteStream(ctx(t), stream); err != nil {
				t.Fatal(err)
			}
			natstest.Eventually(t, 10*time.Second, func() error {
				if _, err := e.tryCount(stream); err != nil {
					return fmt.Errorf("%v (ready: %v)", err, r.p.Ready(ctx(t)))
				}
				return r.p.Ready(ctx(t))
			})
		})
	}
}
