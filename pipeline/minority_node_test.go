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

// TestReadinessOnMinorityNode cuts the routes of the node leading the consumer (replicated three ways) while a
// pipeline is connected to that node alone. The cut-off leader goes on answering the consumer's info requests
// and pulls, with heartbeats, for 10s and more; the pipeline must report not ready within the bound (its replicas
// unheard for 3s, plus a status poll), with the lost quorum as the reason, and be ready and consuming again once
// the routes are back. Before, it stayed ready until the leader stepped down (10–15s into the cut).
func TestReadinessOnMinorityNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	cl := natstest.RunPartition(t, 3)
	setup := newEnvOn(t, nil, natstest.Connect(t, cl.URLs()))
	adminJS := setup.js
	cfg := setup.config(memWindow())
	cfg.Replicas = 3
	provisionRetried(t, adminJS, cfg)
	leader := -1
	natstest.Eventually(t, 30*time.Second, func() error {
		for i, s := range cl.Servers {
			if s.JetStreamIsConsumerLeader(server.DEFAULT_GLOBAL_ACCOUNT, pipeline.DefaultInputStream, pipeline.DefaultConsumer) {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no consumer leader")
	})

	// The worker knows only the leader's node.
	e := newEnvOn(t, nil, natstest.Connect(t, cl.Servers[leader].URL(), nats.IgnoreDiscoveredServers()))
	cfg = e.config(memWindow())
	cfg.Replicas = 3
	r := e.start(cfg)
	sendRetried(t, adminJS, "a-", 5, 20*time.Second)
	e.waitCount(pipeline.DefaultOutputStream, 5, 20*time.Second)
	e.drained(20 * time.Second) // nothing in flight: readiness has only the consumer and streams to go by

	cl.Isolate(leader)
	cut := time.Now()
	// The bound: 3s unheard, a status poll (100ms here) and its requests; 8s leaves room for a loaded machine
	// and stays below the leader's own step-down.
	natstest.Eventually(t, 8*time.Second, func() error {
		err := r.p.Ready(context.Background())
		if err == nil {
			return fmt.Errorf("still ready %s into the cut", time.Since(cut).Round(time.Millisecond))
		}
		if !strings.Contains(err.Error(), "lost its quorum") {
			return fmt.Errorf("not ready, but for another reason: %v", err)
		}
		if g := e.metric("dedupeworker_ready"); g != 0 {
			return fmt.Errorf("dedupeworker_ready %v while Ready says %v", g, err)
		}
		return nil
	})
	t.Logf("not ready %s into the cut: %v", time.Since(cut).Round(time.Millisecond), r.p.Ready(context.Background()))

	cl.Heal(leader)
	natstest.Eventually(t, 60*time.Second, func() error { return r.p.Ready(context.Background()) })
	sendRetried(t, adminJS, "b-", 5, 20*time.Second)
	e.waitCount(pipeline.DefaultOutputStream, 10, 30*time.Second)
}

func TestLeaderCutOff(t *testing.T) {
	const s = time.Second
	peer := func(name string, active time.Duration, offline bool) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: true, Active: active, Offline: offline}
	}
	for _, tc := range []struct {
		name string
		ci   *jetstream.ClusterInfo
		want string // "" = has its quorum
	}{
		{name: "not clustered", ci: nil},
		{name: "one replica", ci: &jetstream.ClusterInfo{Leader: "n1"}},
		{name: "both heard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", s, false), peer("n3", 900*time.Millisecond, false)}}},
		{name: "one of two heard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", 10*s, false), peer("n3", s, false)}}},
		{name: "at the limit", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", 3*s, false), peer("n3", 3*s, false)}}},
		{name: "none heard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", 3100*time.Millisecond, false), peer("n3", 4*s, false)}},
			want: "its leader n1 has lost its quorum (n2 last heard 3.1s ago, n3 last heard 4s ago; 2 of 3 needed)"},
		{name: "offline and unheard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", 0, true), peer("n3", 5*s, false)}},
			want: "n2 offline, n3 last heard 5s ago"},
		{name: "R5, two of four heard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{
			peer("n2", s, false), peer("n3", s, false), peer("n4", 9*s, false), peer("n5", 9*s, false)}}},
		{name: "R5, one of four heard", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{
			peer("n2", s, false), peer("n3", 9*s, false), peer("n4", 9*s, false), peer("n5", 9*s, false)}},
			want: "3 of 5 needed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pipeline.LeaderCutOff(tc.ci)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
