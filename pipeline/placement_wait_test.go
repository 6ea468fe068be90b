package pipeline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// excludedCluster starts a 3-node cluster whose third node takes no stream replicas yet (server tag "!jetstream"):
// the meta leader refuses a stream with 3 replicas ("no suitable peers for placement", 10005) as it does while a
// server has not been heard from since its route came up. Restart the node without its tags to let it take them.
func excludedCluster(t *testing.T) (*natstest.Cluster, *natstest.Server) {
	t.Helper()
	c := natstest.RunClusterWith(t, 3, func(i int, o *server.Options) {
		if i == 2 {
			o.Tags = []string{"!jetstream"}
		}
	})
	return c, c.Servers[2]
}

// A cluster that cannot place the streams' 3 replicas (a server not available for them) holds the start, with the reason in
// the log and in readiness, rather than ending Run: once the server is back, the streams are created and the
// pipeline deduplicates.
func TestProvisionWaitsForPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c, excluded := excludedCluster(t)
	e := newEnvOn(t, nil, natstest.Connect(t, c.URLs()))
	cfg := e.config(memWindow())
	cfg.Replicas, cfg.Provision = 3, true
	cfg = pipeline.WithPlacementStuckAfter(cfg, 2*time.Second)
	p, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = p.Run(runCtx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
			if runErr != nil {
				t.Errorf("Run: %v", runErr)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})

	const says = "the cluster cannot place stream " + pipeline.DefaultInputStream + " with 3 replicas"
	natstest.Eventually(t, 30*time.Second, func() error {
		select {
		case <-done:
			t.Fatalf("Run returned while the cluster could not place its streams: %v", runErr)
		default:
		}
		if !strings.Contains(e.log.String(), says) {
			return fmt.Errorf("no warning %q in the log yet", says)
		}
		if err := p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), says) ||
			!strings.Contains(err.Error(), "DEDUPE_REPLICAS") {
			return fmt.Errorf("readiness: %v; want it to say %q and name DEDUPE_REPLICAS", err, says)
		}
		return nil
	})
	// A refusal that lasts is said once at ERROR, naming the setting that is the likely cause.
	const stuck = `level=ERROR msg="the cluster has refused to place stream ` + pipeline.DefaultInputStream +
		` for 2s: DEDUPE_REPLICAS is the likely cause, not a server restarting; still retrying"`
	natstest.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(e.log.String(), stuck) {
			return fmt.Errorf("no %s in the log yet", stuck)
		}
		return nil
	})

	excluded.Opts.Tags = nil
	excluded.Restart()
	natstest.Eventually(t, 60*time.Second, func() error { return p.Ready(context.Background()) })
	sendRetried(t, e.js, "same", 1, 10*time.Second)
	sendRetried(t, e.js, "same", 1, 10*time.Second)
	e.waitCount(pipeline.DefaultOutputStream, 1, 30*time.Second)
	e.drained(30 * time.Second)
	if got, err := e.tryCount(pipeline.DefaultOutputStream); err != nil || got != 1 {
		t.Errorf("output stream holds %d events (%v), want 1: the second delivery is a duplicate", got, err)
	}
	if n := strings.Count(e.log.String(), "level=ERROR msg=\"the cluster has refused to place"); n != 1 {
		t.Errorf("the lasting refusal was said %d times at ERROR, want once", n)
	}
}
