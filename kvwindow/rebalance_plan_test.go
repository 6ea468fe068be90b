package kvwindow_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestRebalancePlan: the plan spreads leaders evenly in shard order, the current leader winning ties, never moves a
// leader to an offline replica, and reports the offline replicas it left out. A replica behind the leader (not
// current, as followers under claim load often are at the instant the state is read) stays a candidate.
func TestRebalancePlan(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	offline := jetstream.PeerInfo{Offline: true, Lag: 2111}
	behind := jetstream.PeerInfo{Lag: 3}
	// on is a bucket led by leader, its other replicas current unless state says otherwise, as Status reports it.
	on := func(bucket, leader string, state map[string]jetstream.PeerInfo) kvwindow.BucketStatus {
		c := &jetstream.ClusterInfo{Leader: leader}
		for _, r := range three {
			if r == leader {
				continue
			}
			p, ok := state[r]
			if !ok {
				p = jetstream.PeerInfo{Current: true}
			}
			p.Name = r
			c.Replicas = append(c.Replicas, &p)
		}
		return kvwindow.StatusOf(bucket, c)
	}
	mv := func(bucket, from, to string) kvwindow.Move { return kvwindow.Move{Bucket: bucket, From: from, To: to} }
	off := func(bucket, server string) kvwindow.Replica { return kvwindow.Replica{Bucket: bucket, Server: server} }
	for _, tc := range []struct {
		name    string
		status  []kvwindow.BucketStatus
		want    []kvwindow.Move
		offline []kvwindow.Replica
	}{
		{"nothing", nil, nil, nil},
		{"balanced", []kvwindow.BucketStatus{on("b0", "n1", nil), on("b1", "n2", nil), on("b2", "n3", nil)}, nil, nil},
		{"all on one", []kvwindow.BucketStatus{on("b0", "n1", nil), on("b1", "n1", nil), on("b2", "n1", nil)},
			[]kvwindow.Move{mv("b1", "n1", "n2"), mv("b2", "n1", "n3")}, nil},
		{"an offline replica is no target",
			[]kvwindow.BucketStatus{
				on("b0", "n1", map[string]jetstream.PeerInfo{"n3": offline}),
				on("b1", "n1", map[string]jetstream.PeerInfo{"n3": offline}),
				on("b2", "n1", map[string]jetstream.PeerInfo{"n3": offline}),
			},
			[]kvwindow.Move{mv("b1", "n1", "n2")}, []kvwindow.Replica{off("b0", "n3"), off("b1", "n3"), off("b2", "n3")}},
		{"a replica behind the leader is a target",
			[]kvwindow.BucketStatus{
				on("b0", "n1", map[string]jetstream.PeerInfo{"n2": behind, "n3": offline}),
				on("b1", "n1", map[string]jetstream.PeerInfo{"n2": behind, "n3": offline}),
			},
			[]kvwindow.Move{mv("b1", "n1", "n2")}, []kvwindow.Replica{off("b0", "n3"), off("b1", "n3")}},
		{"a replica offline on one bucket only",
			[]kvwindow.BucketStatus{on("b0", "n1", nil), on("b1", "n1", map[string]jetstream.PeerInfo{"n2": offline}), on("b2", "n1", nil)},
			[]kvwindow.Move{mv("b1", "n1", "n3"), mv("b2", "n1", "n2")}, []kvwindow.Replica{off("b1", "n2")}},
		{"every follower behind: still spread",
			[]kvwindow.BucketStatus{on("b0", "n1", nil), on("b1", "n1", map[string]jetstream.PeerInfo{"n2": behind, "n3": behind})},
			[]kvwindow.Move{mv("b1", "n1", "n2")}, nil},
		{"every follower offline: the leader stays",
			[]kvwindow.BucketStatus{on("b0", "n1", nil), on("b1", "n1", map[string]jetstream.PeerInfo{"n2": offline, "n3": offline})},
			nil, []kvwindow.Replica{off("b1", "n2"), off("b1", "n3")}},
		{"single replica, no leader, lost: skipped", []kvwindow.BucketStatus{
			{Bucket: "b0", Replicas: []string{"n1"}, Leader: "n1"},
			{Bucket: "b1", Replicas: three, Unusable: []string{"n3"}},
			{Bucket: "b2", Lost: "deleted"},
			on("b3", "n1", nil), on("b4", "n1", nil),
		}, []kvwindow.Move{mv("b4", "n1", "n2")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := kvwindow.PlanRebalance(tc.status)
			if !slices.Equal(got.Moves, tc.want) {
				t.Errorf("plan %+v, want %+v", got.Moves, tc.want)
			}
			if !slices.Equal(got.Offline, tc.offline) {
				t.Errorf("offline %+v, want %+v", got.Offline, tc.offline)
			}
		})
	}
}
