package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// Scenario 7 (DEDUPE_SOAK=1, make soak): a million envelopes through two replicas; throughput over time and each
// process's RSS, which must stay flat once warm (RSS at 100% within 15% of RSS at 25%).
func TestSoak(t *testing.T) {
	needWorker(t)
	if !soak {
		t.Skip("soak: set DEDUPE_SOAK=1 (make soak); DEDUPE_SOAK_N sets the envelope count (default 1000000)")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DEDUPE_SOAK_N")); err == nil && v > 0 {
		n = v
	}
	start := time.Now()
	srv := natstest.Run(t)
	c := NewClient(t, srv.URL())
	ws := StartWorkers(t, 2, baseEnv(srv.URL()))

	envs := Mixed(MixOptions{N: n, Tenants: []string{"acme", "globex", "initech", "hooli", "umbrella"},
		DupFrac: 0.3, FarFrac: 0.2, BadFrac: 0.001, Seed: uint64(seed) + 7})
	t.Logf("generated %d envelopes in %s", n, time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	t0 := time.Now()
	pubDone := make(chan PublishStats, 1)
	go func() {
		st, err := c.Publish(ctx, envs, 4096, 0, nil)
		if err != nil {
			t.Error(err)
		}
		pubDone <- st
	}()

	memory := func() memSample {
		var s memSample
		for _, w := range ws {
			rss, hwm, err := w.Memory()
			if err != nil {
				t.Errorf("worker %s: %v", w.Name, err)
			}
			s.rss, s.hwm = append(s.rss, rss), append(s.hwm, hwm)
		}
		return s
	}
	mib := func(v []int64) string {
		parts := make([]string, len(v))
		for i, b := range v {
			parts[i] = fmt.Sprintf("%.1f", float64(b)/(1<<20))
		}
		return strings.Join(parts, "/")
	}
	var (
		at25      *memSample
		lastDone  uint64
		lastT     = t0
		published PublishStats
		pubActive = true
	)
	tick := time.NewTicker(time.Second) // sample every second, report every 5s
	defer tick.Stop()
	for {
		select {
		case published = <-pubDone:
			pubActive = false
			t.Logf("published %s (%.0f/s)", published, float64(n)/published.Elapsed.Seconds())
			continue
		case <-tick.C:
		}
		p, err := c.Progress(ctx)
		if err != nil {
			t.Logf("progress: %v", err)
			continue
		}
		done := p.Input - p.Pending
		now := time.Now()
		m := memory()
		finished := !pubActive && done >= uint64(n) && p.Pending == 0
		if at25 == nil && done >= uint64(n/4) {
			at25 = &m
			t.Logf("25%% processed at t=%.0fs: RSS MiB %s", now.Sub(t0).Seconds(), mib(m.rss))
		}
		if now.Sub(lastT) >= 5*time.Second || finished {
			t.Logf("t=%4.0fs processed %8d (%5.1f%%) %6.0f/s backlog %7d  RSS MiB %s  peak %s",
				now.Sub(t0).Seconds(), done, 100*float64(done)/float64(n), float64(done-lastDone)/now.Sub(lastT).Seconds(), p.Pending, mib(m.rss), mib(m.hwm))
			lastDone, lastT = done, now
		}
		if finished {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("soak did not finish in 2h")
		}
	}
	elapsed := time.Since(t0)
	end := memory()
	c.WaitQuiet(t, uint64(n), 5*time.Minute)
	r := c.Ledger(t, envs, nil)
	for i, w := range ws {
		if at25 == nil {
			break
		}
		growth := float64(end.rss[i]) / float64(at25.rss[i])
		t.Logf("worker %s: RSS %.1f MiB at 25%%, %.1f MiB at 100%% (%+.1f%%), peak (VmHWM) %.1f MiB",
			w.Name, float64(at25.rss[i])/(1<<20), float64(end.rss[i])/(1<<20), 100*(growth-1), float64(end.hwm[i])/(1<<20))
		if growth > 1.15 {
			t.Errorf("worker %s: RSS grew %.1f%% between 25%% and 100%% of the soak (limit 15%%)", w.Name, 100*(growth-1))
		}
	}
	t.Logf("FIGURES scenario=soak envelopes=%d replicas=2 elapsed=%s throughput=%.0f/s rss25=%s rss100=%s peak=%s ledger=%q",
		n, elapsed.Round(time.Second), float64(n)/elapsed.Seconds(), mib(at25OrZero(at25)), mib(end.rss), mib(end.hwm), r.Summary())
}

type memSample struct{ rss, hwm []int64 }

func at25OrZero(s *memSample) []int64 {
	if s == nil {
		return nil
	}
	return s.rss
}
