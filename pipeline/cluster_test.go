package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestLeaderChange moves the leaders of the consumer and of the output stream (replicated three ways) under a
// running pipeline: it pauses and resumes by itself, losing and doubling nothing.
func TestLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	e := newEnvOn(t, nil, natstest.Connect(t, c.URLs()))
	cfg := e.config(memWindow())
	cfg.Replicas = 3
	provisionRetried(t, e.js, cfg)
	r := e.start(cfg)

	sendRetried(t, e.js, "a-", 10, 10*time.Second)
	e.waitCount(pipeline.DefaultOutputStream, 10, 10*time.Second)

	for _, api := range []string{
		"$JS.API.CONSUMER.LEADER.STEPDOWN.INGEST.dedupeworker",
		"$JS.API.STREAM.LEADER.STEPDOWN.DEDUPED",
	} {
		natstest.Eventually(t, 10*time.Second, func() error {
			m, err := e.nc.Request(api, nil, 2*time.Second)
			if err != nil {
				return err
			}
			var resp struct {
				Success bool `json:"success"`
			}
			if err := json.Unmarshal(m.Data, &resp); err != nil || !resp.Success {
				return fmt.Errorf("%s: %s", api, m.Data)
			}
			return nil
		})
	}
	sendRetried(t, e.js, "b-", 10, 10*time.Second)
	e.waitCount(pipeline.DefaultOutputStream, 20, 30*time.Second)
	e.drained(10 * time.Second)
	natstest.Eventually(t, 10*time.Second, func() error { return r.p.Ready(context.Background()) })
}
