package integration

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// within polls cond every 100ms for at most timeout and reports whether it became true.
func within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	return true
}

// Scenario 2: the one file-backed server goes down mid-stream and comes back on the same port and store; the
// workers (and the harness) reconnect by themselves.
func TestNATSRestart(t *testing.T) {
	needWorker(t)
	n := scale(6_000, 60_000)
	restarts := scale(2, 6)
	publishFor := scale(8*time.Second, 60*time.Second)
	outage := scale(2*time.Second, 5*time.Second)
	start := time.Now()

	srv := natstest.Run(t) // file storage in a temp dir, kept across Restart
	c := NewClient(t, srv.URL())
	vars := baseEnv(srv.URL())
	vars["DEDUPE_ACK_WAIT"] = "2s"
	ws := StartWorkers(t, 2, vars)

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex"}, DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed) + 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	marks, at, pubDone := publishMarked(ctx, t, c, envs, publishFor, restarts)
	var outages []time.Duration
	for k := range restarts {
		<-marks[k]
		down := time.Now()
		srv.Shutdown()
		// The outage lasts `outage`, and at least until every worker reports not ready (at most 5s): in-flight
		// claims and publishes fail meanwhile, and the harness's publishes pile up for retry.
		noticed := within(5*time.Second, func() bool {
			for _, w := range ws {
				if w.Ready() {
					return false
				}
			}
			return true
		})
		if !noticed {
			t.Logf("restart %d: a worker still answered /readyz 200 5s into the outage", k+1)
		}
		<-time.After(time.Until(down.Add(outage))) // the outage's length is the fault itself
		srv.Restart()
		outages = append(outages, time.Since(down).Round(time.Millisecond))
		for _, w := range ws {
			w.WaitReady(60 * time.Second)
		}
		t.Logf("restart %d at envelope %d: server down %s; workers ready again after %s", k+1, at(k), outages[k], time.Since(down).Round(time.Millisecond))
	}
	_, r := c.finish(t, envs, pubDone)
	for _, w := range ws {
		if !w.Running() {
			t.Errorf("worker %s is not running after the restarts", w.Name)
		}
	}
	t.Logf("FIGURES scenario=nats-restart envelopes=%d restarts=%d outages=%v elapsed=%s ledger=%q",
		n, restarts, outages, time.Since(start).Round(time.Second), r.Summary())
}

// jetStreamUp reports whether a server at url answers JetStream account requests.
func jetStreamUp(url string) (bool, error) {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return false, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err == nil, err
}

// Scenario 2b: the server process itself is SIGKILLed mid-stream (no clean shutdown: the file store recovers from
// whatever reached the disk) and started again on the same port and store.
func TestNATSKill(t *testing.T) {
	needWorker(t)
	n := scale(6_000, 60_000)
	kills := scale(2, 6)
	publishFor := scale(8*time.Second, 60*time.Second)
	start := time.Now()

	srv := RunServerProc(t)
	c := NewClient(t, srv.URL())
	vars := baseEnv(srv.URL())
	vars["DEDUPE_ACK_WAIT"] = "2s"
	ws := StartWorkers(t, 2, vars)

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex"}, DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed) + 22})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	marks, at, pubDone := publishMarked(ctx, t, c, envs, publishFor, kills)
	for k := range kills {
		<-marks[k]
		down := time.Now()
		srv.Kill()
		<-time.After(time.Second) // the outage's length is the fault itself
		srv.Start()
		back := time.Since(down).Round(time.Millisecond)
		for _, w := range ws {
			w.WaitReady(60 * time.Second)
		}
		t.Logf("kill %d at envelope %d: server back after %s; workers ready after %s", k+1, at(k), back, time.Since(down).Round(time.Millisecond))
	}
	q, r := c.finish(t, envs, pubDone)
	t.Logf("FIGURES scenario=nats-kill envelopes=%d server_kills=%d redeliveries=%d elapsed=%s ledger=%q",
		// Signed: a SIGKILL can lose the consumer's last unsynced delivery count, so it may trail the input.
		n, srv.Kills, int64(q.Deliveries)-int64(q.Input), time.Since(start).Round(time.Second), r.Summary())
}
