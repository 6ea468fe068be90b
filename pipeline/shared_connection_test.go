package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// sharedPipelines runs two pipelines on one connection: "a" on the default streams, "b" on its own (INGEST_B on
// "ingestb.>", DEDUPED_B, DLQ_B), each with its own metrics.
func sharedPipelines(t *testing.T, nc *nats.Conn, srv *natstest.Server) (a, b *env, ra, rb *running) {
	t.Helper()
	a, b = newEnvOn(t, srv, nc), newEnvOn(t, srv, nc)
	cfgA := a.config(memWindow())
	cfgB := b.config(memWindow())
	cfgB.InputStream, cfgB.InputPrefix = "INGEST_B", "ingestb"
	cfgB.OutputStream, cfgB.OutputPrefix = "DEDUPED_B", "dedupedb"
	cfgB.DLQStream, cfgB.DLQPrefix = "DLQ_B", "dlqb"
	return a, b, a.start(cfgA), b.start(cfgB)
}

// drainedOn waits until stream's consumer has nothing pending or unacknowledged.
func drainedOn(t *testing.T, js jetstream.JetStream, stream string) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() error {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(c, stream, pipeline.DefaultConsumer)
		if err != nil {
			return err
		}
		info, err := cons.Info(c)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("%s: pending %d, unacknowledged %d", stream, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// TestTwoPipelinesOneConnection: two pipelines share one connection, each on its own streams; both drain, and each
// output holds exactly its own events.
func TestTwoPipelinesOneConnection(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv.URL())
	a, b, _, _ := sharedPipelines(t, nc, srv)
	const n = 20
	for i := range n {
		a.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("a-%d", i)), []byte("a"))
		b.publish("ingestb.t1.gh", hdr("X-GitHub-Delivery", fmt.Sprintf("b-%d", i)), []byte("b"))
	}
	drainedOn(t, a.js, pipeline.DefaultInputStream)
	drainedOn(t, b.js, "INGEST_B")
	if got := a.count(pipeline.DefaultOutputStream); got != n {
		t.Errorf("%s holds %d events, want %d", pipeline.DefaultOutputStream, got, n)
	}
	if got := b.count("DEDUPED_B"); got != n {
		t.Errorf("DEDUPED_B holds %d events, want %d", got, n)
	}
}

// TestRefusedAckCountedByItsPipeline: the server refuses the acks of one pipeline's consumer; that pipeline counts
// them and is not ready, the other one on the same connection counts none and stays ready. It failed while each
// pipeline wrapped the connection's error handler: the second one's wrapper called the first one's, which took the
// other consumer's refusals for its own (and each refused ack was also counted unconfirmed).
func TestRefusedAckCountedByItsPipeline(t *testing.T) {
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		o.Users = []*server.User{{Username: "worker", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.INGEST_B.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}}}
	}))
	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("worker", "pw"))
	a, b, ra, rb := sharedPipelines(t, nc, srv)
	a.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "a"), []byte("a"))
	b.publish("ingestb.t1.gh", hdr("X-GitHub-Delivery", "b"), []byte("b"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if got := b.metric("dedupeworker_ack_failures_total", "reason", pipeline.AckRefused); got < 1 {
			return fmt.Errorf("b: ack_failures{refused} = %v, want > 0", got)
		}
		return nil
	})
	drainedOn(t, a.js, pipeline.DefaultInputStream)
	if got := a.metric("dedupeworker_ack_failures_total"); got != 0 {
		t.Errorf("a: ack_failures = %v, want 0 (the refused acks are b's)", got)
	}
	if err := ra.p.Ready(context.Background()); err != nil {
		t.Errorf("a: Ready = %v", err)
	}
	// A refused ack is counted once, as refused: not also as unconfirmed for the answer it never gets.
	if got := b.metric("dedupeworker_ack_failures_total", "reason", pipeline.AckUnconfirmed); got != 0 {
		t.Errorf("b: ack_failures{unconfirmed} = %v, want 0", got)
	}
	if err := rb.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "acknowledgements failing") {
		t.Errorf("b: Ready = %v while its acks are refused", err)
	}
}
