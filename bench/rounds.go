package main

import (
	"context"
	"fmt"
	"strings"
)

// drainPhase runs -repeat rounds of a drain of every contender. Rounds interleave the contenders, so that a burst
// of load from elsewhere on the machine hits all of them alike, and each round rotates their order by one, so that
// none always runs first after an idle machine or last after the others' settling servers. Round one keeps the
// plain order, which puts the heap-measured runs first: their settling overlaps the later runs. Each contender's
// median-rate run joins the results; every run stays in b.drains for the per-round notes and the CPU figures.
func (b *bench) drainPhase(ctx context.Context, w *Workload) error {
	var contenders []string
	for _, c := range allContenders {
		if b.has(c) {
			contenders = append(contenders, c)
		}
	}
	runs := map[string][]*Result{}
	var orders []string
	for round := 0; round < b.opts.repeat; round++ {
		order := roundOrder(contenders, round)
		orders = append(orders, strings.Join(order, ", "))
		for _, c := range order {
			wl := w
			if c == cNaive {
				wl = w.Prefix(b.opts.naiveN)
			}
			heap := round == 0 && (c == cFloor || c == cNative || c == cWorker)
			r, err := b.drain(ctx, c, c, wl, drainOpts{heap: heap})
			if err != nil {
				return err
			}
			runs[c] = append(runs[c], r)
		}
		if err := b.scalingRound(ctx, w, round); err != nil {
			return err
		}
	}
	b.drains = runs
	if b.opts.repeat > 1 && len(contenders) > 1 {
		b.note("drain order by round: %s", strings.Join(orders, "; "))
	}
	for _, c := range contenders {
		rs := runs[c]
		med := medianRun(rs)
		b.results = append(b.results, med)
		if len(rs) > 1 {
			rates := make([]string, len(rs))
			for i, r := range rs {
				rates[i] = fmt.Sprintf("%.0f", r.Rate())
				if r.Mismatch() && r != med {
					b.results = append(b.results, r) // a wrong count is never hidden by the median
				}
			}
			b.note("%s drain: env/s over %d rounds: %s (the median run is in the table)", c, len(rs), strings.Join(rates, ", "))
		}
	}
	if ws := runs[cWorker]; len(ws) > 1 {
		for _, c := range []string{cFloor, cNaive, cNative} {
			if others := runs[c]; len(others) == len(ws) {
				ratios := make([]string, len(ws))
				for i := range ws {
					ratios[i] = fmt.Sprintf("%.2f", ws[i].Rate()/others[i].Rate())
				}
				b.note("worker/%s drain throughput round by round: %s", c, strings.Join(ratios, ", "))
			}
		}
		if fs := runs[cFloor]; len(fs) == len(ws) {
			for _, side := range []string{"client", "server"} {
				ratios := make([]string, len(ws))
				for i := range ws {
					ratios[i] = fmtRatio(perEnvelope(ws[i]).side(side) / perEnvelope(fs[i]).side(side))
				}
				b.note("worker/floor %s µs/envelope round by round: %s", side, strings.Join(ratios, ", "))
			}
		}
	}
	return nil
}
