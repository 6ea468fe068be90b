package integration

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// killLoop SIGKILLs a random replica every 1–2 seconds and starts it again at once, until stop is closed.
func killLoop(t *testing.T, ws Workers, rng *rand.Rand, stop <-chan struct{}) (done <-chan struct{}) {
	d := make(chan struct{})
	go func() {
		defer close(d)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second + time.Duration(rng.Int64N(int64(time.Second)))):
			}
			w := ws[rng.IntN(len(ws))]
			w.Kill()
			if err := w.start(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return d
}

// Scenario 1: three replicas share the consumer while a random one is SIGKILLed every 1–2 s and restarted.
func TestReplicaCrashes(t *testing.T) {
	needWorker(t)
	n := scale(20_000, 200_000)
	killFor := scale(20*time.Second, 120*time.Second)
	start := time.Now()

	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	vars := baseEnv(srv.URL())
	vars["DEDUPE_ACK_WAIT"] = "2s"
	ws := StartWorkers(t, 3, vars)

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex", "initech", "t-4_x"},
		DupFrac: 0.30, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed)})
	keyed, distinct, unkeyed, dead := Count(envs)
	t.Logf("workload: %d envelopes: %d keyed (%d distinct keys, %d duplicates), %d unkeyed, %d dead letters; kills for %s",
		n, keyed, distinct, keyed-distinct, unkeyed, dead, killFor)

	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	stop := make(chan struct{})
	killed := killLoop(t, ws, rng, stop)

	// Publishing spans three quarters of the kill period, so that kills hit claims, publishes and acks, and the
	// far copies arrive many kills after their originals.
	ctx, cancel := context.WithTimeout(context.Background(), killFor+2*time.Minute)
	defer cancel()
	var maxRedelivered int
	var mu sync.Mutex
	pubDone := make(chan PublishStats, 1)
	go func() {
		st, err := c.Publish(ctx, envs, 1024, float64(n)/(killFor.Seconds()*0.75), nil)
		if err != nil {
			t.Error(err)
		}
		pubDone <- st
	}()
	timer := time.NewTimer(killFor)
	var pub PublishStats
	for waiting := 2; waiting > 0; {
		select {
		case pub = <-pubDone:
			t.Logf("published %s", pub)
			pubDone = nil
			waiting--
		case <-timer.C:
			close(stop)
			<-killed
			waiting--
		case <-time.After(time.Second):
			if p, err := c.Progress(ctx); err == nil {
				mu.Lock()
				maxRedelivered = max(maxRedelivered, p.Redelivered)
				mu.Unlock()
			}
		}
	}
	for _, w := range ws {
		w.WaitReady(30 * time.Second)
	}
	q := c.WaitQuiet(t, uint64(n), 2*time.Minute)
	t.Logf("quiet: %s", q)
	r := c.Ledger(t, envs, nil)
	t.Logf("FIGURES scenario=crashes envelopes=%d kills=%d max_redelivered=%d elapsed=%s ledger=%q",
		n, ws.Kills(), maxRedelivered, time.Since(start).Round(time.Second), r.Summary())
	if ws.Kills() < int(killFor/(2*time.Second)) {
		t.Errorf("only %d kills in %s", ws.Kills(), killFor)
	}
}
