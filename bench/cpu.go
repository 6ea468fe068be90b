package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// envelopeCPU is a drain's CPU per envelope, in µs: the client side (the worker processes; the bench process for
// the in-process contenders floor and naive, and for native's publisher) and the nats-server. Both come from the
// processes' utime+stime (/proc/<pid>/stat) over the drain: the server's read at its start and end, a worker's
// read at the end (it starts with the drain, so its start-up counts, as it does in the drain's time).
type envelopeCPU struct {
	client, server float64
}

func (c envelopeCPU) total() float64 { return c.client + c.server }

func (c envelopeCPU) side(name string) float64 {
	if name == "client" {
		return c.client
	}
	return c.server
}

// perEnvelope is r's CPU per envelope; NaN where a side was not measured.
func perEnvelope(r *Result) envelopeCPU {
	c := envelopeCPU{client: NA, server: NA}
	if r == nil || r.Envelopes == 0 {
		return c
	}
	n := float64(r.Envelopes)
	client := r.ClientCPU
	if len(r.WorkerCPU) > 0 {
		client = 0
		for _, v := range r.WorkerCPU {
			client += v
		}
	}
	if client > 0 {
		c.client = client * 1e6 / n
	}
	if r.ServerCPU > 0 {
		c.server = r.ServerCPU * 1e6 / n
	}
	return c
}

// drainCPU is a contender's figures over its drain rounds, each the median over the rounds on its own (so the
// client median and the server median may come from different rounds, and total is the median of the totals).
type drainCPU struct {
	envelopeCPU
	totalUS, rate float64
	rounds        int
}

func medianCPU(rs []*Result) drainCPU {
	var client, server, total, rate []float64
	for _, r := range rs {
		c := perEnvelope(r)
		client, server, total = append(client, c.client), append(server, c.server), append(total, c.total())
		rate = append(rate, r.Rate())
	}
	return drainCPU{envelopeCPU: envelopeCPU{client: medianNaN(client), server: medianNaN(server)},
		totalUS: medianNaN(total), rate: medianOf(rate), rounds: len(rs)}
}

// medianNaN is medianOf over the measured values (NaN when none was).
func medianNaN(vs []float64) float64 {
	var ok []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			ok = append(ok, v)
		}
	}
	if len(ok) == 0 {
		return NA
	}
	return medianOf(ok)
}

// writeCPUTable prints each drain contender's CPU per envelope beside its rate, and worker/floor for each column
// when both ran: throughput follows CPU per envelope on a machine with no idle core.
func writeCPUTable(w io.Writer, drains map[string][]*Result) error {
	cpu := map[string]drainCPU{}
	rounds := 0
	for _, c := range allContenders {
		if rs := drains[c]; len(rs) > 0 {
			cpu[c] = medianCPU(rs)
			rounds = max(rounds, len(rs))
		}
	}
	if len(cpu) == 0 {
		return nil
	}
	of := "the drain"
	if rounds > 1 {
		of = fmt.Sprintf("medians over %d rounds", rounds)
	}
	fmt.Fprintf(w, "CPU per envelope in the drain (%s; client: the worker processes, or the bench process for floor, naive and native):\n", of)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tclient µs/env\tserver µs/env\ttotal µs/env\tenv/s\t")
	for _, c := range allContenders {
		if f, ok := cpu[c]; ok {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t\n", c, fmtUS(f.client), fmtUS(f.server), fmtUS(f.totalUS), f.rate)
		}
	}
	wf, okW := cpu[cWorker]
	ff, okF := cpu[cFloor]
	if okW && okF {
		fmt.Fprintf(tw, "worker/floor\t%s\t%s\t%s\t%s\t\n", fmtRatio(wf.client/ff.client), fmtRatio(wf.server/ff.server),
			fmtRatio(wf.totalUS/ff.totalUS), fmtRatio(wf.rate/ff.rate))
	}
	return tw.Flush()
}

// fmtUS prints µs with one decimal, n/a when not measured.
func fmtUS(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

// withCPU fills the summary's CPU lines from the drain rounds: the worker's and floor's medians.
func (s Summary) withCPU(drains map[string][]*Result) Summary {
	if rs := drains[cWorker]; len(rs) > 0 {
		c := medianCPU(rs)
		s.WorkerClientUS, s.WorkerServerUS = c.client, c.server
	}
	if rs := drains[cFloor]; len(rs) > 0 {
		c := medianCPU(rs)
		s.FloorClientUS, s.FloorServerUS = c.client, c.server
	}
	return s
}
