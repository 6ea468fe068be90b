package kvwindow_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestRebalanceSkipsOfflineReplica: on a 3-node cluster, two R3 shards led by the meta leader, with one of the other
// two servers stopped. Rebalance must move a leader to the server still running, never to the stopped one; each
// move it reports names the server that leads the bucket afterwards. A step-down asked toward the stopped server
// (the stream elects the running one instead) reports where the leader went, as a move and in its error.
func TestRebalanceSkipsOfflineReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster in -short")
	}
	c := natstest.RunCluster(t, 3)
	cfg := kvwindow.DefaultConfig()
	cfg.Bucket = "offline"
	cfg.Shards = 2
	cfg.Replicas = 3
	cfg.Timeout = 30 * time.Second // bucket creation and elections on a loaded machine
	js := jsFor(t, c.URLs())
	w := newWindow(t, js, cfg)
	buckets := w.Buckets()

	// Both buckets led by the meta leader, so that stopping another server elects nothing but what the test asks.
	lead := c.WaitMetaLeader(30 * time.Second).Opts.ServerName
	for _, b := range buckets {
		natstest.Eventually(t, 30*time.Second, func() error {
			l := c.StreamLeader("KV_"+b, 20*time.Second).Opts.ServerName
			if l == lead {
				return nil
			}
			m, err := js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN.KV_"+b,
				fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, lead), 5*time.Second)
			if err != nil {
				return err
			}
			return fmt.Errorf("leader %s (asked %s: %s)", l, lead, m.Data)
		})
	}

	// Stop the first other server by name: a plan that ignores replica state sends the second bucket's leader
	// there (it leads nothing, and comes first among the followers).
	var others []*natstest.Server
	for _, s := range c.Servers {
		if s.Opts.ServerName != lead {
			others = append(others, s)
		}
	}
	stopped, running := others[0], others[1]
	off, healthy := stopped.Opts.ServerName, running.Opts.ServerName
	stopped.Shutdown()

	// A window bound through the servers still running.
	var urls []string
	for _, s := range c.Servers {
		if s != stopped {
			urls = append(urls, s.URL())
		}
	}
	c.WaitMetaLeader(30 * time.Second)
	// Short requests, retried: one left unanswered while the cluster notices the stop costs little.
	rebound := cfg
	rebound.Timeout = 5 * time.Second
	m := kvwindow.ManagerOf(newWindow(t, jsFor(t, strings.Join(urls, ","), nats.DontRandomize()), rebound))
	natstest.Eventually(t, 30*time.Second, func() error {
		status, err := m.Status(ctxT(t, 10*time.Second))
		if err != nil {
			return err
		}
		for _, b := range status {
			if b.Leader != lead {
				return fmt.Errorf("bucket %s led by %q, want %s", b.Bucket, b.Leader, lead)
			}
			if b.Cluster == nil || !slices.ContainsFunc(b.Cluster.Replicas, func(p *jetstream.PeerInfo) bool { return p.Name == off && p.Offline }) {
				return fmt.Errorf("bucket %s: %s not reported offline yet", b.Bucket, off)
			}
		}
		return nil
	})

	plan, err := m.Rebalance(ctxT(t, 10*time.Second), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []kvwindow.Move{{Bucket: buckets[1], From: lead, To: healthy}}
	if !slices.Equal(plan.Moves, want) {
		t.Fatalf("plan with %s offline: %+v, want %+v", off, plan.Moves, want)
	}
	if wantOff := []kvwindow.Replica{{Bucket: buckets[0], Server: off}, {Bucket: buckets[1], Server: off}}; !slices.Equal(plan.Offline, wantOff) {
		t.Errorf("plan with %s offline reports offline %+v, want %+v", off, plan.Offline, wantOff)
	}
	done, err := m.Rebalance(ctxT(t, 60*time.Second), true)
	moves := done.Moves
	if err != nil {
		t.Fatalf("rebalance: %v (moved %+v)", err, moves)
	}
	if !slices.Equal(moves, want) {
		t.Fatalf("moved %+v, want %+v", moves, want)
	}
	for _, mv := range moves {
		if got := c.StreamLeader("KV_"+mv.Bucket, 20*time.Second).Opts.ServerName; got != mv.To {
			t.Errorf("bucket %s: reported moved to %s, led by %s", mv.Bucket, mv.To, got)
		}
	}

	// A step-down toward the stopped server: the stream elects the running one, and the step-down says so.
	asked := kvwindow.Move{Bucket: buckets[0], From: lead, To: off}
	made, err := kvwindow.StepDown(ctxT(t, 60*time.Second), m, asked)
	got := c.StreamLeader("KV_"+buckets[0], 20*time.Second).Opts.ServerName
	if got != healthy {
		t.Fatalf("bucket %s led by %s after a step-down toward the stopped %s, want %s", buckets[0], got, off, healthy)
	}
	if made != (kvwindow.Move{Bucket: buckets[0], From: lead, To: healthy, Asked: off}) {
		t.Errorf("step-down toward %s reported %+v, want the move to %s", off, made, healthy)
	}
	if err == nil || !strings.Contains(err.Error(), healthy) {
		t.Errorf("step-down toward %s: error %v, want one naming %s", off, err, healthy)
	}
}
