package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

const windowStatusUsage = `Usage:
  dedupeworker window status    [--json] [--timeout D]
  dedupeworker window rebalance [--yes] [--json] [--timeout D]

status shows, for each bucket of the window (DEDUPE_BUCKET, or its DEDUPE_WINDOW_SHARDS shards): the server
leading it, the servers holding its replicas with the state of each (current, N operations behind, or OFFLINE: not
seen by the bucket's leader lately, and so holding nothing it can serve), its keys (live claims and expiry
markers), bytes, and the server heap its keys cost on each replica (keys x 185 bytes, measured); then, per server,
the buckets it leads and holds and its heap estimate. rebalance plans how to spread the buckets' leaders evenly
over the servers holding them (nats-server does not spread them by itself), never onto an offline replica (it
names those it skipped; a replica merely behind stays a candidate), and, with --yes, moves them by preferred
step-downs, one bucket at a time, stopping where a stream elects another server than the one asked for. Each
bucket's state is one request to the server, bounded by --timeout (default 5s): a bucket that does not answer in
time fails the command, naming the bucket.

`

func runWindowStatus(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("window "+sub, windowStatusUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	yes := false
	if sub == "rebalance" {
		fs.BoolVar(&yes, "yes", false, "move the leaders (without it: only the plan)")
	}
	timeout := fs.Duration("timeout", kvwindow.DefaultTimeout, "longest each request to a bucket may take")
	conn := addConnFlags(fs)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usageErr("window %s: --timeout must be positive, got %s", sub, *timeout)
	}
	// Each request is bounded by --timeout; the whole, by the buckets' count of them (and rebalance's elections).
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	b, err := bindWindow(ctx, conn, *timeout, stderr)
	if err != nil {
		return err
	}
	defer b.nc.Close()
	w := b.w
	if sub == "rebalance" {
		plan, err := w.Rebalance(ctx, yes)
		if *asJSON {
			skipped := append([]kvwindow.Replica{}, plan.Offline...) // [], not null, in JSON
			if werr := writeJSON(stdout, map[string]any{"applied": yes, "moves": plan.Moves, "skipped_offline": skipped}); werr != nil {
				return werr
			}
		} else {
			printMoves(stdout, plan, yes)
		}
		return failErr(err)
	}
	status, err := w.Status(ctx)
	if err != nil {
		return failErr(err)
	}
	var health []replicaState
	for _, b := range status {
		health = append(health, replicaHealth(b.Bucket, b.Cluster)...)
	}
	if *asJSON {
		return writeJSON(stdout, map[string]any{"buckets": status, "servers": serverTotals(status, health), "replicas": health})
	}
	printStatus(stdout, status, health)
	return nil
}

// replicaState is the health of one replica of a bucket, as the bucket's stream info reports it.
type replicaState struct {
	Bucket  string `json:"bucket"`
	Server  string `json:"server"`
	Leader  bool   `json:"leader,omitempty"`
	Current bool   `json:"current"`           // caught up with the leader
	Offline bool   `json:"offline,omitempty"` // not seen by the leader lately
	Lag     uint64 `json:"lag,omitempty"`     // operations behind the leader
}

// replicaHealth is the state of each replica of bucket, the leader first; none on a server without a cluster.
func replicaHealth(bucket string, ci *jetstream.ClusterInfo) []replicaState {
	if ci == nil {
		return nil
	}
	var out []replicaState
	if ci.Leader != "" {
		out = append(out, replicaState{Bucket: bucket, Server: ci.Leader, Leader: true, Current: true})
	}
	for _, p := range ci.Replicas {
		if p == nil {
			continue
		}
		out = append(out, replicaState{Bucket: bucket, Server: p.Name, Current: p.Current && !p.Offline, Offline: p.Offline, Lag: p.Lag})
	}
	return out
}

// replicaCell writes a bucket's replicas for the table: "n1 (leader), n2, n3 (OFFLINE, 2111 behind)".
func replicaCell(bucket string, replicas []string, health []replicaState) string {
	var parts []string
	for _, h := range health {
		if h.Bucket != bucket {
			continue
		}
		s := h.Server
		switch {
		case h.Leader:
			s += " (leader)"
		case h.Offline:
			s += fmt.Sprintf(" (OFFLINE, %d behind)", h.Lag)
		case !h.Current:
			s += fmt.Sprintf(" (%d behind)", h.Lag)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return strings.Join(replicas, ", ") // a server without a cluster: no replica states
	}
	return strings.Join(parts, ", ")
}

// serverLoad is what one server leads and holds of the window.
type serverLoad struct {
	Server         string `json:"server"`
	Leads          int    `json:"leads"`
	Holds          int    `json:"holds"`
	Keys           uint64 `json:"keys"`
	MemoryEstimate uint64 `json:"memory_estimate_bytes"`
	Offline        int    `json:"offline,omitempty"` // buckets whose replica on this server is offline
}

// serverTotals adds up what each server leads and holds; a replica its bucket's leader reports offline is counted
// apart (Offline), its keys and heap not at all: it serves none of them.
func serverTotals(status []kvwindow.BucketStatus, health []replicaState) []serverLoad {
	offline := map[[2]string]bool{}
	for _, h := range health {
		if h.Offline {
			offline[[2]string{h.Bucket, h.Server}] = true
		}
	}
	by := map[string]*serverLoad{}
	for _, b := range status {
		for i, r := range b.Replicas {
			l := by[r]
			if l == nil {
				l = &serverLoad{Server: r}
				by[r] = l
			}
			if offline[[2]string{b.Bucket, r}] {
				l.Offline++
				continue
			}
			l.Holds++
			l.Keys += b.Keys
			l.MemoryEstimate += b.MemoryEstimate
			if i == 0 && r == b.Leader {
				l.Leads++
			}
		}
	}
	out := make([]serverLoad, 0, len(by)) // [], not null, in JSON
	for _, server := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[server])
	}
	return out
}

func printStatus(w io.Writer, status []kvwindow.BucketStatus, health []replicaState) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tLEADER\tREPLICAS\tKEYS\tBYTES\tHEAP/REPLICA")
	var keys, bytes uint64
	var lost []kvwindow.BucketStatus
	for _, b := range status {
		if b.Lost != "" {
			lost = append(lost, b)
			fmt.Fprintf(tw, "%s\tLOST\t-\t-\t-\t-\n", b.Bucket)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", b.Bucket, cmp.Or(b.Leader, "-"), cmp.Or(replicaCell(b.Bucket, b.Replicas, health), "-"), b.Keys, human(b.Bytes), human(b.MemoryEstimate))
		keys += b.Keys
		bytes += b.Bytes
	}
	fmt.Fprintf(tw, "total\t\t\t%d\t%s\t\n", keys, human(bytes))
	_ = tw.Flush()
	for _, b := range lost {
		fmt.Fprintf(w, "\n%s is LOST: %s\n", b.Bucket, b.Lost)
	}
	if loads := serverTotals(status, health); len(loads) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tLEADS\tHOLDS\tOFFLINE\tKEYS\tHEAP ESTIMATE")
		for _, l := range loads {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", l.Server, l.Leads, l.Holds, l.Offline, l.Keys, human(l.MemoryEstimate))
		}
		_ = tw.Flush()
	}
}

// printMoves writes what rebalance moved (or would move), and the offline replicas it left out: leaders spread
// over the online replicas only are not spread over all of them.
func printMoves(w io.Writer, plan kvwindow.Plan, applied bool) {
	skipped := skippedOffline(plan.Offline)
	switch {
	case len(plan.Moves) == 0 && skipped == "":
		fmt.Fprintln(w, "the leaders are spread already: nothing to move")
		return
	case len(plan.Moves) == 0:
		fmt.Fprintf(w, "nothing to move among online replicas; skipped offline: %s\n", skipped)
		return
	}
	verb := "would move"
	if applied {
		verb = "moved"
	}
	for _, m := range plan.Moves {
		fmt.Fprintf(w, "%s %s: leader %s -> %s", verb, m.Bucket, m.From, m.To)
		if m.Asked != "" {
			fmt.Fprintf(w, " (asked %s)", m.Asked)
		}
		fmt.Fprintln(w)
	}
	if skipped != "" {
		fmt.Fprintf(w, "skipped offline: %s\n", skipped)
	}
	if !applied {
		fmt.Fprintln(w, "(a plan: run with --yes to move them)")
	}
}

// skippedOffline names offline replicas server by server, in the order first seen: "n3 (buckets w-0, w-1), n2
// (bucket w-2)"; "" for none.
func skippedOffline(offline []kvwindow.Replica) string {
	var servers []string
	buckets := map[string][]string{}
	for _, r := range offline {
		if _, ok := buckets[r.Server]; !ok {
			servers = append(servers, r.Server)
		}
		buckets[r.Server] = append(buckets[r.Server], r.Bucket)
	}
	parts := make([]string, 0, len(servers))
	for _, s := range servers {
		noun := "bucket"
		if len(buckets[s]) > 1 {
			noun = "buckets"
		}
		parts = append(parts, fmt.Sprintf("%s (%s %s)", s, noun, strings.Join(buckets[s], ", ")))
	}
	return strings.Join(parts, ", ")
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
