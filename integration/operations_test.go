package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Scenario 10: a replica frozen (SIGSTOP) for longer than the output stream's duplicate window, under load. Its
// deliveries are redelivered to the other replica and published there; when it wakes up it must not publish them
// again (claimed before the freeze, held but not claimed, or taken by its open pull request during the freeze).
func TestFrozenReplica(t *testing.T) {
	needWorker(t)
	n := scale(4_000, 20_000)
	freeze := 25 * time.Second
	srv := RunServerProc(t)
	c := NewClient(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The output stream with a 10 s duplicate window, shorter than the freeze.
	if _, err := c.JS.CreateStream(ctx, jetstream.StreamConfig{
		Name: OutputStream, Subjects: []string{OutputPrefix + ".>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	vars := baseEnv(srv.URL())
	vars["DEDUPE_ACK_WAIT"] = "2s"
	vars["DEDUPE_OUTPUT_MAX_AGE"] = "1h"
	ws := StartWorkers(t, 2, vars)

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex"}, DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed) + 10})
	marks, at, pubDone := publishMarked(ctx, t, c, envs, 40*time.Second, 1)
	<-marks[0]
	t.Logf("freezing %s for %s at envelope %d (duplicate window 10s, ack wait 2s)", ws[0].Name, freeze, at(0))
	ws[0].Freeze(freeze)
	_, r := c.finish(t, envs, pubDone)
	stale := ws.Sum(t, "dedupeworker_stale_deliveries_total")
	held := ws.SumLabel(t, "dedupeworker_naks_total", "reason", "held-too-long")
	// Events stored twice (the frozen replica's buffered publishes sent after the other published them), and how
	// often the frozen replica's connection was fenced instead of sending them.
	doubled := max(r.Unique-r.WantUnique, 0)
	fenced := strings.Count(ws[0].Log(), "fenced instead of written to")
	t.Logf("FIGURES scenario=frozen envelopes=%d freeze=%s stale_skipped=%v handed_back=%v doubled=%d fenced=%d ledger=%q",
		n, freeze, stale, held, doubled, fenced, r.Summary())
}

// Scenario 11: leader changes of the output stream under steady load on a three-node cluster (every stream at
// three replicas), then a phase in which the output stream acknowledges nothing (its subjects taken away) and
// comes back. Publishes that a leader change leaves unanswered must not pile up in the client until every later
// publish fails; readiness must follow the output; every event is published once.
func TestOutputLeaderChanges(t *testing.T) {
	needWorker(t)
	n := scale(8_000, 40_000)
	stepDowns := scale(10, 30)
	cl := natstest.RunCluster(t, 3)
	c := NewClient(t, cl.URLs())
	vars := baseEnv(cl.URLs())
	vars["DEDUPE_REPLICAS"] = "3"
	vars["DEDUPE_ACK_WAIT"] = "5s"
	ws := StartWorkers(t, 1, vars)
	w := ws[0]

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex"}, DupFrac: 0.3, FarFrac: 0.2, Seed: uint64(seed) + 11})
	marks, _, pubDone := publishMarked(ctx, t, c, envs, 40*time.Second, stepDowns+2)
	for k := range stepDowns {
		<-marks[k]
		natstest.Eventually(t, 20*time.Second, func() error {
			m, err := c.NC.Request("$JS.API.STREAM.LEADER.STEPDOWN."+OutputStream, nil, 2*time.Second)
			if err != nil {
				return err
			}
			var resp struct {
				Success bool                `json:"success"`
				Error   *jetstream.APIError `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &resp); err != nil {
				return err
			}
			if !resp.Success {
				return fmt.Errorf("step-down: %v", resp.Error)
			}
			return nil
		})
	}

	// The output stream stops acknowledging: its subjects are moved away, so every publish goes unanswered.
	<-marks[stepDowns]
	st, err := c.JS.Stream(ctx, OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	orig := st.CachedInfo().Config
	away := orig
	away.Subjects = []string{"nowhere.>"}
	if _, err := c.JS.UpdateStream(ctx, away); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, func() (bool, string) { return !w.Ready(), "the worker stays ready while no publish succeeds" })
	<-marks[stepDowns+1]
	if _, err := c.JS.UpdateStream(ctx, orig); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	poll(t, 30*time.Second, func() (bool, string) { return w.Ready(), "the worker is not ready after the output came back" })
	t.Logf("ready again %s after the output stream came back", time.Since(back).Round(time.Millisecond))
	_, r := c.finish(t, envs, pubDone)
	if !w.Ready() {
		t.Error("the worker is not ready at the end")
	}
	t.Logf("FIGURES scenario=output-leader envelopes=%d step_downs=%d ledger=%q", n, stepDowns, r.Summary())
}

// Sum adds metric over every worker (all its samples); a worker that does not answer counts nothing.
func (ws Workers) Sum(t *testing.T, metric string) float64 {
	t.Helper()
	total := 0.0
	for _, w := range ws {
		m, err := w.Metrics()
		if err != nil {
			t.Logf("worker %s: /metrics: %v", w.Name, err)
			continue
		}
		for _, v := range SumMetric(m, metric, "") {
			total += v
		}
	}
	return total
}

// SumLabel adds the samples of metric whose label name has value over every worker.
func (ws Workers) SumLabel(t *testing.T, metric, name, value string) float64 {
	t.Helper()
	total := 0.0
	for _, w := range ws {
		m, err := w.Metrics()
		if err != nil {
			t.Logf("worker %s: /metrics: %v", w.Name, err)
			continue
		}
		total += SumMetric(m, metric, name)[value]
	}
	return total
}
