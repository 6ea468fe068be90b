package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestControlHeaderEnvelopes: envelopes with an empty body and a Status header, which nats.go's consumer
// takes for server status messages, flood the input beside genuine deliveries. Every genuine delivery is processed
// and every such envelope is dead-lettered with a readable reason. Before: 0 of 5 genuine deliveries processed in
// 15s; the control-shaped envelopes were never handled.
func TestControlHeaderEnvelopes(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(e.kvWindow())
	e.start(cfg)
	shapes := []nats.Header{
		{"Status": {"409"}, "Description": {"Consumer Deleted"}},
		{"Status": {"400"}, "Description": {"Bad Request"}},
		{"Status": {"100"}, "Description": {"Idle Heartbeat"}},
		{"Status": {"408"}, "Description": {"Request Timeout"}},
		{"Status": {"409"}, "Description": {"Leadership Change"}},
		{"Status": {"404"}},
	}
	const poison, genuine = 60, 5
	for i := range poison {
		h := nats.Header{}
		for k, v := range shapes[i%len(shapes)] {
			h[k] = v
		}
		h.Set("X-GitHub-Delivery", fmt.Sprint("poison-", i))
		e.publish("ingest.t1.gh", h, nil)
	}
	for i := range genuine {
		e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprint("genuine-", i)), []byte("ok"))
	}
	natstest.Eventually(t, 15*time.Second, func() error {
		if n, _ := e.tryCount(pipeline.DefaultOutputStream); n != genuine {
			return fmt.Errorf("%d of %d genuine deliveries processed", n, genuine)
		}
		return nil
	})
	e.drained(20 * time.Second)
	dl := e.messages(pipeline.DefaultDLQStream)
	if len(dl) != poison {
		t.Fatalf("dead letters %d, want %d", len(dl), poison)
	}
	for _, m := range dl {
		if m.Subject != "dedupe.dlq."+contract.DeadControlHeader {
			t.Fatalf("dead letter on %s", m.Subject)
		}
		if !strings.Contains(header(t, m, "Dedupe-Error"), "Status") {
			t.Errorf("dead letter reason %q does not name the Status header", header(t, m, "Dedupe-Error"))
		}
		// The dead letter itself must not look like a status message to a nats.go consumer of the DLQ stream.
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			t.Errorf("dead letter keeps the Status header with an empty body: %v", m.Header)
		}
	}
}
