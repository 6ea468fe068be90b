package integration

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Scenario 1: three replicas share the consumer while a random one is SIGKILLed every 1–2 s and restarted.
//
// The stream arrives in bursts, one per fault, and each fault lands 0–300 ms after its burst was acknowledged by
// INGEST, while the replicas hold hundreds of envelopes between claim, publish and ack. In chaos runs every fourth
// fault is a 3 s SIGSTOP instead (longer than the 2 s ack wait: the replica wakes up with stale work in hand).
func TestReplicaCrashes(t *testing.T) {
	needWorker(t)
	n := scale(20_000, 200_000)
	faultsFor := scale(20*time.Second, 120*time.Second)
	freezeEvery := scale(0, 4)
	start := time.Now()

	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	vars := baseEnv(srv.URL())
	vars["DEDUPE_ACK_WAIT"] = "2s"
	ws := StartWorkers(t, 3, vars)

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex", "initech", "t-4_x"},
		DupFrac: 0.30, FarFrac: 0.2, BadFrac: 0.005, Seed: uint64(seed)})
	keyed, distinct, unkeyed, dead := Count(envs)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	bursts := int(faultsFor / (1500 * time.Millisecond))
	per := (n + bursts - 1) / bursts
	t.Logf("workload: %d envelopes: %d keyed (%d distinct keys, %d duplicates), %d unkeyed, %d dead letters; %d bursts of %d, one fault each",
		n, keyed, distinct, keyed-distinct, unkeyed, dead, bursts, per)

	ctx, cancel := context.WithTimeout(context.Background(), faultsFor+3*time.Minute)
	defer cancel()
	var pub PublishStats
	for b, i := 0, 0; i < n; b, i = b+1, i+per {
		interval := time.After(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		st, err := c.Publish(ctx, envs[i:min(i+per, n)], 1024, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		pub.Published += st.Published
		pub.Retries += st.Retries
		<-time.After(time.Duration(rng.Int64N(int64(300 * time.Millisecond)))) // where in the burst the fault lands
		w := ws[rng.IntN(len(ws))]
		if freezeEvery > 0 && (b+1)%freezeEvery == 0 {
			w.Freeze(3 * time.Second)
		} else {
			w.Kill()
			w.Start()
		}
		<-interval // the fault rhythm: one every 1–2 s
	}
	pub.Elapsed = time.Since(start)
	t.Logf("published %s", pub)
	for _, w := range ws {
		w.WaitReady(30 * time.Second)
	}
	q := c.WaitQuiet(t, uint64(n), 2*time.Minute)
	t.Logf("quiet: %s", q)
	r := c.Ledger(t, envs, nil)
	freezes := 0
	for _, w := range ws {
		freezes += w.Freezes
	}
	t.Logf("FIGURES scenario=crashes envelopes=%d kills=%d freezes=%d redeliveries=%d elapsed=%s ledger=%q",
		n, ws.Kills(), freezes, q.Deliveries-q.Input, time.Since(start).Round(time.Second), r.Summary())
}
