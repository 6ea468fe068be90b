package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Scenario 3: a three-node cluster, everything at three replicas; the node leading the window bucket's stream is
// stopped mid-stream and brought back later. Claims must keep exactly one winner.
func TestClusterLeaderLoss(t *testing.T) {
	testClusterLeaderLoss(t, 1)
}

// Scenario 3s: the same with the window sharded over four buckets (DEDUPE_WINDOW_SHARDS=4); the stopped node is
// the leader of the first shard.
func TestClusterLeaderLossSharded(t *testing.T) {
	testClusterLeaderLoss(t, 4)
}

func testClusterLeaderLoss(t *testing.T, shards int) {
	needWorker(t)
	n := scale(6_000, 40_000)
	rounds := scale(1, 4)
	publishFor := scale(12*time.Second, 80*time.Second)
	start := time.Now()

	cl := natstest.RunCluster(t, 3)
	c := NewClient(t, cl.URLs())
	vars := baseEnv(cl.URLs())
	vars["DEDUPE_REPLICAS"] = "3"
	vars["DEDUPE_ACK_WAIT"] = "2s"
	vars["DEDUPE_WINDOW_SHARDS"] = fmt.Sprint(shards)
	bucket := "KV_dedupe-window"
	if shards > 1 {
		bucket += "-00"
	}
	ws := StartWorkers(t, 2, vars)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range []string{InputStream, OutputStream, DLQStream, bucket} {
		st, err := c.JS.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s provisioned with %d replicas, want 3 (DEDUPE_REPLICAS=3)", name, r)
		}
	}

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex", "initech"}, DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed) + 3})
	// Each round: stop the bucket's leader at (2k+1)/(2·rounds+1) of the stream, bring it back at (2k+2)/(2·rounds+1).
	marks, at, pubDone := publishMarked(ctx, t, c, envs, publishFor, 2*rounds)
	var events []string
	for k := range rounds {
		<-marks[2*k]
		// The bucket's leader; in chaos runs the later rounds take the input's and the output's leaders too.
		target := []string{bucket, InputStream, bucket, OutputStream}[k%4]
		leader := cl.StreamLeader(target, 30*time.Second)
		down := time.Now()
		leader.Shutdown()
		newLeader := cl.StreamLeader(target, 30*time.Second)
		elected := time.Since(down).Round(time.Millisecond)
		// Work goes on with two of three nodes: the outputs must grow while the old leader is down.
		before, _ := c.Progress(ctx)
		grew := within(30*time.Second, func() bool {
			p, err := c.Progress(ctx)
			return err == nil && p.Outputs+p.DeadLetter >= before.Outputs+before.DeadLetter+100
		})
		if !grew {
			t.Errorf("round %d: no progress in 30s with %s down (%s)", k+1, leader.Opts.ServerName, before)
		}
		<-marks[2*k+1]
		leader.Restart()
		cl.WaitMetaLeader(30 * time.Second)
		events = append(events, fmt.Sprintf("round %d: stopped %s (leader of %s) at envelope %d, new leader %s after %s, restarted after %s",
			k+1, leader.Opts.ServerName, target, at(2*k), newLeader.Opts.ServerName, elected, time.Since(down).Round(time.Millisecond)))
		t.Log(events[len(events)-1])
	}
	_, r := c.finish(t, envs, pubDone)
	for _, w := range ws {
		if !w.Running() {
			t.Errorf("worker %s is not running after the leader changes", w.Name)
		}
	}
	t.Logf("FIGURES scenario=cluster shards=%d envelopes=%d leader_stops=%d elapsed=%s ledger=%q", shards, n, rounds, time.Since(start).Round(time.Second), r.Summary())
}
