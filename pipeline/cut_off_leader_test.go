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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// cutOffNode is a 3-node cluster whose routes the test can cut, with INGEST and its consumer on one node alone
// (R1) and a worker connected to that node alone: cut off, the node still answers the consumer's info requests
// and pulls, so readiness has only the output stream and the window to go by.
type cutOffNode struct {
	cl    *natstest.Partition
	node  int
	admin *nats.Conn
	js    jetstream.JetStream // the admin's
	e     *env                // the worker's connection, to the node alone
}

func newCutOffNode(t *testing.T) *cutOffNode {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	cl := natstest.RunPartition(t, 3)
	admin := natstest.Connect(t, cl.URLs())
	adminJS, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	setup := &env{t: t, nc: admin, js: adminJS, reg: prometheus.NewRegistry(), log: &natstest.Buffer{}}
	provisionRetried(t, adminJS, setup.config(memWindow()))
	in := cl.StreamLeader(pipeline.DefaultInputStream, 30*time.Second)
	node := -1
	for i, s := range cl.Servers {
		if s == in {
			node = i
		}
	}
	nc := natstest.Connect(t, in.URL(), nats.IgnoreDiscoveredServers())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nc: nc, js: js, reg: prometheus.NewRegistry(), log: &natstest.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pipeline log:\n%s", e.log.String())
		}
	})
	return &cutOffNode{cl: cl, node: node, admin: admin, js: adminJS, e: e}
}

// lead makes stream R3 (it is R1 or R3 already) and moves its leader to the node, its replicas current.
func (c *cutOffNode) lead(stream string) {
	t := c.e.t
	natstest.Eventually(t, 60*time.Second, func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.js.Stream(cctx, stream)
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 {
			cfg := info.Config
			cfg.Replicas = 3
			_, err := c.js.UpdateStream(cctx, cfg)
			return fmt.Errorf("scaled up: %v", err)
		}
		node := c.cl.Servers[c.node]
		if !node.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			body := fmt.Sprintf(`{"placement":{"preferred":%q}}`, node.Opts.ServerName)
			_, err := c.admin.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(body), 5*time.Second)
			return fmt.Errorf("leader %v, not %s (stepped down: %v)", info.Cluster, node.Opts.ServerName, err)
		}
		if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return fmt.Errorf("replicas %v", info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		return nil
	})
}

// alone moves the R1 stream to the node: deleted and created again until it is placed there.
func (c *cutOffNode) alone(stream string) {
	t := c.e.t
	natstest.Eventually(t, 60*time.Second, func() error {
		if c.cl.Servers[c.node].JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return nil
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.js.Stream(cctx, stream)
		if err != nil {
			return err
		}
		cfg := s.CachedInfo().Config
		if err := c.js.DeleteStream(cctx, stream); err != nil {
			return err
		}
		_, err = c.js.CreateStream(cctx, cfg)
		return fmt.Errorf("created again elsewhere: %v", err)
	})
}

// notReadyNaming waits (8s: 3s unheard, a status poll and its requests, on a loaded machine, and below the
// leader's own step-down at 10s) until the worker is not ready for the cut-off leader of what.
func notReadyNaming(t *testing.T, r *running, cut time.Time, what string) {
	t.Helper()
	natstest.Eventually(t, 8*time.Second, func() error {
		err := r.p.Ready(context.Background())
		if err == nil {
			return fmt.Errorf("still ready %s into the cut", time.Since(cut).Round(time.Millisecond))
		}
		if !strings.Contains(err.Error(), "lost its quorum") || !strings.Contains(err.Error(), what) {
			return fmt.Errorf("not ready, but not for %s's quorum: %v", what, err)
		}
		return nil
	})
	t.Logf("not ready %s into the cut: %v", time.Since(cut).Round(time.Millisecond), r.p.Ready(context.Background()))
}

// TestReadinessOutputLeaderSteppedDown cuts the routes of the node leading DEDUPED (R3) while a worker is connected
// to that node alone (INGEST and the consumer R1 there, answering throughout). The worker must turn not ready for
// the lost quorum and stay not ready once the cut-off leader steps down (10–15s in) and leaves the status poll's
// reads of DEDUPED unanswered, until the routes are back. Before, an unanswered read dropped the verdict of the
// last answer: the worker was ready again, with nothing coming to prove otherwise.
func TestReadinessOutputLeaderSteppedDown(t *testing.T) {
	c := newCutOffNode(t)
	c.lead(pipeline.DefaultOutputStream)
	r := c.e.start(c.e.config(memWindow()))

	probeNC := natstest.Connect(t, c.cl.Servers[c.node].URL(), nats.IgnoreDiscoveredServers())
	probe, err := jetstream.New(probeNC)
	if err != nil {
		t.Fatal(err)
	}
	c.cl.Isolate(c.node)
	cut := time.Now()
	notReadyNaming(t, r, cut, "stream "+pipeline.DefaultOutputStream)

	// Some 10–15s into the cut the leader steps down; its server then answers DEDUPED's reads without a leader, and
	// some seconds later describes the replicas as heard (or leaves the reads unanswered). Until that answer has
	// stood for two status polls (each read waits up to 2s), the worker must never be ready.
	var fooled time.Time
	deadline := cut.Add(60 * time.Second)
	for fooled.IsZero() || time.Since(fooled) < 5*time.Second {
		if err := r.p.Ready(context.Background()); err == nil {
			t.Fatalf("ready %s into the cut, with DEDUPED's leader cut off", time.Since(cut).Round(time.Millisecond))
		}
		if fooled.IsZero() {
			pctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := probe.Stream(pctx, pipeline.DefaultOutputStream)
			cancel()
			if err != nil || st.CachedInfo().Cluster.Leader == "" && pipeline.LeaderCutOff(st.CachedInfo().Cluster) == "" {
				fooled = time.Now()
				t.Logf("DEDUPED's reads unanswered, or answered as if its replicas were heard, %s into the cut (%v)",
					time.Since(cut).Round(time.Millisecond), err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("DEDUPED's cut-off leader still answers as one 60s into the cut")
		}
		time.Sleep(20 * time.Millisecond) // the pace of the checks, not a wait for a condition
	}
	t.Logf("not ready %s into the cut: %v", time.Since(cut).Round(time.Millisecond), r.p.Ready(context.Background()))

	c.cl.Heal(c.node)
	natstest.Eventually(t, 60*time.Second, func() error { return r.p.Ready(context.Background()) })
	c.e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "after-heal"), []byte("x"))
	c.e.waitCount(pipeline.DefaultOutputStream, 1, 30*time.Second)
}

// TestReadinessWindowBucketCutOff cuts the routes of the node leading the window's bucket (R3) while a worker is
// connected to that node alone (INGEST, the consumer and DEDUPED R1 there, answering throughout). A cut-off leader
// answers its bucket's info requests, the window's Ping among them, for 10s and more: the worker must turn not
// ready within the bound, naming the bucket, and be ready again once the routes are back. Before, it stayed ready
// until the bucket's leader stepped down.
func TestReadinessWindowBucketCutOff(t *testing.T) {
	c := newCutOffNode(t)
	c.alone(pipeline.DefaultOutputStream)
	wcfg := kvwindow.DefaultConfig()
	wcfg.Timeout = 2 * time.Second
	wcfg.Replicas = 3
	natstest.Eventually(t, 30*time.Second, func() error {
		w, err := kvwindow.New(ctx(t), c.js, wcfg)
		if err == nil {
			_ = w.Close()
		}
		return err
	})
	c.lead("KV_" + wcfg.Bucket)
	var w *kvwindow.Window
	natstest.Eventually(t, 30*time.Second, func() error {
		var err error
		w, err = kvwindow.New(ctx(t), c.e.js, wcfg)
		return err
	})
	t.Cleanup(func() { _ = w.Close() })
	r := c.e.start(c.e.config(w))

	c.cl.Isolate(c.node)
	cut := time.Now()
	notReadyNaming(t, r, cut, "bucket "+wcfg.Bucket)
	// The gauge follows the reason the poll stored (set before the poll logs the change): polled, not read once.
	natstest.Eventually(t, 5*time.Second, func() error {
		if g := c.e.metric("dedupeworker_ready"); g != 0 {
			return fmt.Errorf("dedupeworker_ready %v while Ready says %v", g, r.p.Ready(context.Background()))
		}
		return nil
	})

	c.cl.Heal(c.node)
	natstest.Eventually(t, 60*time.Second, func() error { return r.p.Ready(context.Background()) })
	c.e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "after-heal"), []byte("x"))
	c.e.waitCount(pipeline.DefaultOutputStream, 1, 30*time.Second)
}
