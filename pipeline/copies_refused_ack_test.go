package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestRefusedCountKeepsAckRefusal: two pipelines share one connection; the server refuses the increments of the
// first one's copies count (its counter stream's subjects) and the acks of the second one. The server says both
// only in an asynchronous -ERR, which the connection keeps as its last error, where the second pipeline reads why
// its acks go unanswered: the count's refusals must not stand in for the acks' there. Each refused ack of the
// second pipeline is counted as refused, never as unconfirmed. Before, the count sent an increment for every copy
// until the first one's answer was due (the publish timeout), each refused: the acks' refusals were overwritten
// and counted as unconfirmed.
func TestRefusedCountKeepsAckRefusal(t *testing.T) {
	const copiesStream = "COPIES_A"
	srv := natstest.Run(t, natstest.WithOptions(func(o *server.Options) {
		o.Users = []*server.User{{Username: "worker", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.ACK.INGEST_B.>", copiesStream + ".>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}}}
	}))
	nc := natstest.Connect(t, srv.URL(), nats.UserInfo("worker", "pw"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *env {
		e := &env{t: t, srv: srv, nc: nc, js: js, reg: prometheus.NewRegistry(), log: &natstest.Buffer{}}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("pipeline log:\n%s", e.log.String())
			}
		})
		return e
	}
	a, b := mk(), mk()
	cfgA := a.config(memWindow())
	cfgA.CopiesStream = copiesStream
	cfgA.PublishTimeout = 30 * time.Second // the count's first answer (a timeout) is not due during the test
	cfgB := b.config(memWindow())
	cfgB.InputStream, cfgB.InputPrefix = "INGEST_B", "ingestb"
	cfgB.OutputStream, cfgB.OutputPrefix = "DEDUPED_B", "dedupedb"
	cfgB.DLQStream, cfgB.DLQPrefix = "DLQ_B", "dlqb"
	a.start(cfgA)
	b.start(cfgB)

	// The first pipeline acknowledges a steady flow of copies of one event, each counted.
	a.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "counted"), []byte("a"))
	a.waitCount(pipeline.DefaultOutputStream, 1, 10*time.Second)
	flow, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-flow.Done():
				return
			case <-tick.C:
				_, _ = js.PublishMsg(flow, &nats.Msg{Subject: "ingest.t1.gh", Header: hdr("X-GitHub-Delivery", "counted")})
			}
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	natstest.Eventually(t, 10*time.Second, func() error {
		if got := a.metric("dedupeworker_envelopes_total", "outcome", pipeline.OutcomeDuplicate); got < 3 {
			return fmt.Errorf("a: %v copies acknowledged", got)
		}
		return nil
	})

	b.publish("ingestb.t1.gh", hdr("X-GitHub-Delivery", "b"), []byte("b"))
	natstest.Eventually(t, 20*time.Second, func() error {
		if got := b.metric("dedupeworker_ack_failures_total"); got < 2 {
			return fmt.Errorf("b: %v ack failures", got)
		}
		return nil
	})
	if got := b.metric("dedupeworker_ack_failures_total", "reason", pipeline.AckUnconfirmed); got != 0 {
		t.Errorf("b: ack_failures{unconfirmed} = %v of %v, want 0: the count's refusals stood in for the acks'", got,
			b.metric("dedupeworker_ack_failures_total"))
	}
	if got := a.metric("dedupeworker_ack_failures_total"); got != 0 {
		t.Errorf("a: ack_failures = %v, want 0", got)
	}
}
