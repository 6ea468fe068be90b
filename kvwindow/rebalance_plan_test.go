package kvwindow_test

import (
	"slices"
	"testing"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// TestRebalancePlan: the plan spreads leaders evenly in shard order, the current leader winning ties, and never
// moves a leader to a replica that is offline or behind (BucketStatus.Unusable).
func TestRebalancePlan(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	on := func(bucket, leader string, unusable ...string) kvwindow.BucketStatus {
		replicas := []string{leader}
		for _, r := range three {
			if r != leader {
				replicas = append(replicas, r)
			}
		}
		return kvwindow.BucketStatus{Bucket: bucket, Leader: leader, Replicas: replicas, Unusable: unusable}
	}
	mv := func(bucket, from, to string) kvwindow.Move { return kvwindow.Move{Bucket: bucket, From: from, To: to} }
	for _, tc := range []struct {
		name   string
		status []kvwindow.BucketStatus
		want   []kvwindow.Move
	}{
		{"nothing", nil, nil},
		{"balanced", []kvwindow.BucketStatus{on("b0", "n1"), on("b1", "n2"), on("b2", "n3")}, nil},
		{"all on one", []kvwindow.BucketStatus{on("b0", "n1"), on("b1", "n1"), on("b2", "n1")},
			[]kvwindow.Move{mv("b1", "n1", "n2"), mv("b2", "n1", "n3")}},
		{"an offline replica is no target", []kvwindow.BucketStatus{on("b0", "n1", "n3"), on("b1", "n1", "n3"), on("b2", "n1", "n3")},
			[]kvwindow.Move{mv("b1", "n1", "n2")}},
		{"a replica behind on one bucket only", []kvwindow.BucketStatus{on("b0", "n1"), on("b1", "n1", "n2"), on("b2", "n1")},
			[]kvwindow.Move{mv("b1", "n1", "n3"), mv("b2", "n1", "n2")}},
		{"every follower unusable: the leader stays", []kvwindow.BucketStatus{on("b0", "n1"), on("b1", "n1", "n2", "n3")}, nil},
		{"single replica, no leader, lost: skipped", []kvwindow.BucketStatus{
			{Bucket: "b0", Replicas: []string{"n1"}, Leader: "n1"},
			{Bucket: "b1", Replicas: three},
			{Bucket: "b2", Lost: "deleted"},
			on("b3", "n1"), on("b4", "n1"),
		}, []kvwindow.Move{mv("b4", "n1", "n2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kvwindow.PlanRebalance(tc.status); !slices.Equal(got, tc.want) {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}
