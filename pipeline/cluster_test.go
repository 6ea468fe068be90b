package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

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
	nc := natstest.Connect(t, c.URLs())
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
	cfg := e.config(memWindow())
	cfg.Replicas = 3
	r := e.start(cfg)

	send := func(prefix string) {
		for i := range 10 {
			natstest.Eventually(t, 10*time.Second, func() error {
				_, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "ingest.t1.gh",
					Header: hdr("X-GitHub-Delivery", prefix+strconv.Itoa(i))})
				return err
			})
		}
	}
	send("a-")
	e.waitCount(pipeline.DefaultOutputStream, 10, 10*time.Second)

	for _, api := range []string{
		"$JS.API.CONSUMER.LEADER.STEPDOWN.INGEST.dedupeworker",
		"$JS.API.STREAM.LEADER.STEPDOWN.DEDUPED",
	} {
		natstest.Eventually(t, 10*time.Second, func() error {
			m, err := nc.Request(api, nil, 2*time.Second)
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
	send("b-")
	e.waitCount(pipeline.DefaultOutputStream, 20, 30*time.Second)
	e.drained(10 * time.Second)
	natstest.Eventually(t, 10*time.Second, func() error { return r.p.Ready(context.Background()) })
}
