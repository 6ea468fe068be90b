package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

const windowStatusUsage = `Usage:
  dedupeworker window status    [--json]
  dedupeworker window rebalance [--yes] [--json]

status shows, for each bucket of the window (DEDUPE_BUCKET, or its DEDUPE_WINDOW_SHARDS shards): the server leading
it, the servers holding its replicas, its keys (live claims and expiry markers), bytes, and the server heap its keys
cost on each replica (keys x 180 bytes, measured); then, per server, the buckets it leads and holds and its heap
estimate. rebalance plans how to spread the buckets' leaders evenly over the servers holding them (nats-server does
not spread them by itself) and, with --yes, moves them by preferred step-downs, one bucket at a time.

`

// runWindowStatus is "window status" and "window rebalance".
func runWindowStatus(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("window "+sub, windowStatusUsage, stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	yes := false
	if sub == "rebalance" {
		fs.BoolVar(&yes, "yes", false, "move the leaders (without it: only the plan)")
	}
	conn := addConnFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("window %s: unexpected argument %q", sub, fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	w, _, nc, err := bindWindow(ctx, conn, "window "+sub, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()
	if sub == "rebalance" {
		moves, err := w.Rebalance(ctx, yes)
		if *asJSON {
			if werr := writeJSON(stdout, map[string]any{"applied": yes, "moves": moves}); werr != nil {
				return werr
			}
		} else {
			printMoves(stdout, moves, yes)
		}
		if err != nil {
			return failErr(err)
		}
		return nil
	}
	status, err := w.Status(ctx)
	if err != nil {
		return failErr(err)
	}
	if *asJSON {
		return writeJSON(stdout, map[string]any{"buckets": status, "servers": serverTotals(status)})
	}
	printStatus(stdout, status)
	return nil
}

// serverLoad is what one server leads and holds of the window.
type serverLoad struct {
	Server         string `json:"server"`
	Leads          int    `json:"leads"`
	Holds          int    `json:"holds"`
	Keys           uint64 `json:"keys"`
	MemoryEstimate uint64 `json:"memory_estimate_bytes"`
}

func serverTotals(status []kvwindow.BucketStatus) []serverLoad {
	by := map[string]*serverLoad{}
	for _, b := range status {
		for i, r := range b.Replicas {
			l := by[r]
			if l == nil {
				l = &serverLoad{Server: r}
				by[r] = l
			}
			l.Holds++
			l.Keys += b.Keys
			l.MemoryEstimate += b.MemoryEstimate
			if i == 0 && r == b.Leader {
				l.Leads++
			}
		}
	}
	out := make([]serverLoad, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

func printStatus(w io.Writer, status []kvwindow.BucketStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tLEADER\tREPLICAS\tKEYS\tBYTES\tHEAP/REPLICA")
	var keys, bytes uint64
	for _, b := range status {
		leader := b.Leader
		if leader == "" {
			leader = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\t%s\n", b.Bucket, leader, b.Replicas, b.Keys, human(b.Bytes), human(b.MemoryEstimate))
		keys += b.Keys
		bytes += b.Bytes
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t%s\t\n", keys, human(bytes))
	_ = tw.Flush()
	if loads := serverTotals(status); len(loads) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tLEADS\tHOLDS\tKEYS\tHEAP ESTIMATE")
		for _, l := range loads {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", l.Server, l.Leads, l.Holds, l.Keys, human(l.MemoryEstimate))
		}
		_ = tw.Flush()
	}
}

func printMoves(w io.Writer, moves []kvwindow.Move, applied bool) {
	if len(moves) == 0 {
		fmt.Fprintln(w, "the leaders are spread already: nothing to move")
		return
	}
	verb := "would move"
	if applied {
		verb = "moved"
	}
	for _, m := range moves {
		fmt.Fprintf(w, "%s %s: leader %s -> %s\n", verb, m.Bucket, m.From, m.To)
	}
	if !applied {
		fmt.Fprintln(w, "(a plan: run with --yes to move them)")
	}
}

// human prints a byte count with a binary unit.
func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
