package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestWindowStatusSharded(t *testing.T) {
	shardedWindow(t, 4, "a", "b", "c", "d", "e", "f", "g", "h")
	code, stdout, stderr := runCLI(t, "", "window", "status", "--json")
	if code != 0 {
		t.Fatalf("window status: exit %d: %s", code, stderr)
	}
	var got struct {
		Buckets []kvwindow.BucketStatus `json:"buckets"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	var keys uint64
	for i, b := range got.Buckets {
		if b.Bucket != kvwindow.ShardBucket("dedupe-window", 4, i) {
			t.Errorf("bucket %d: %s", i, b.Bucket)
		}
		keys += b.Keys
	}
	if len(got.Buckets) != 4 || keys != 8 {
		t.Errorf("status: %d buckets, %d keys; want 4 and 8", len(got.Buckets), keys)
	}
	code, stdout, _ = runCLI(t, "", "window", "status")
	if code != 0 || !strings.Contains(stdout, "dedupe-window-03") || !strings.Contains(stdout, "HEAP/REPLICA") {
		t.Errorf("window status (table): exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "", "window", "rebalance")
	if code != 0 || !strings.Contains(stdout, "nothing to move") {
		t.Errorf("window rebalance on a single server: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "", "window", "rebalance", "--json")
	if code != 0 || !strings.Contains(stdout, `"skipped_offline":[]`) {
		t.Errorf("window rebalance --json on a single server: exit %d, want skipped_offline empty\n%s", code, stdout)
	}
	// The same buckets with another number of shards: refused, saying why.
	t.Setenv("DEDUPE_WINDOW_SHARDS", "2")
	code, _, stderr = runCLI(t, "", "window", "status")
	if code != exitFailure || !strings.Contains(stderr, "was created with 4 shards, not 2") {
		t.Errorf("window status with 2 shards over 4: exit %d, %s", code, stderr)
	}
}

// A replica its leader reports offline or behind says so, and an offline server holds none of the bucket's keys.
func TestWindowStatusReplicaHealth(t *testing.T) {
	ci := &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{
		{Name: "n2", Current: true},
		{Name: "n3", Offline: true, Lag: 2111},
		{Name: "n4", Current: false, Lag: 12},
	}}
	health := replicaHealth("w", ci)
	if got := replicaCell("w", nil, health); got != "n1 (leader), n2, n3 (OFFLINE, 2111 behind), n4 (12 behind)" {
		t.Errorf("replicas: %q", got)
	}
	if replicaHealth("w", nil) != nil || replicaCell("w", []string{}, nil) != "" {
		t.Error("a single server has no replica states")
	}
	status := []kvwindow.BucketStatus{{Bucket: "w", Leader: "n1", Replicas: []string{"n1", "n2", "n3", "n4"}, Keys: 3005, MemoryEstimate: 3005 * kvwindow.BytesPerKey}}
	for _, l := range serverTotals(status, health) {
		switch {
		case l.Server == "n3" && (l.Holds != 0 || l.Keys != 0 || l.Offline != 1):
			t.Errorf("offline n3: %+v", l)
		case l.Server != "n3" && (l.Holds != 1 || l.Keys != 3005 || l.Offline != 0):
			t.Errorf("%s: %+v", l.Server, l)
		}
	}
}

// A move whose stream elected another server than the one asked for names both: where the leader went, and what
// was asked.
func TestPrintMovesNamesTheServerAsked(t *testing.T) {
	var b strings.Builder
	printMoves(&b, kvwindow.Plan{Moves: []kvwindow.Move{{Bucket: "w-0", From: "n1", To: "n2"}, {Bucket: "w-1", From: "n1", To: "n2", Asked: "n3"}}}, true)
	if want := "moved w-0: leader n1 -> n2\nmoved w-1: leader n1 -> n2 (asked n3)\n"; b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// A plan that left offline replicas out says so and names them, rather than calling the leaders spread: they are
// spread over the online replicas only.
func TestPrintMovesNamesSkippedOfflineReplicas(t *testing.T) {
	offline := []kvwindow.Replica{{Bucket: "w-0", Server: "n3"}, {Bucket: "w-1", Server: "n3"}, {Bucket: "w-1", Server: "n2"}}
	for _, tc := range []struct {
		name string
		plan kvwindow.Plan
		want string
	}{
		{"spread", kvwindow.Plan{}, "the leaders are spread already: nothing to move\n"},
		{"nothing to move, replicas skipped", kvwindow.Plan{Offline: offline[:1]},
			"nothing to move among online replicas; skipped offline: n3 (bucket w-0)\n"},
		{"moves, replicas skipped", kvwindow.Plan{Moves: []kvwindow.Move{{Bucket: "w-2", From: "n1", To: "n2"}}, Offline: offline},
			"would move w-2: leader n1 -> n2\nskipped offline: n3 (buckets w-0, w-1), n2 (bucket w-1)\n" +
				"(a plan: run with --yes to move them)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printMoves(&b, tc.plan, false)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

// window status -h quotes the heap per key the estimate uses, so the two cannot drift apart.
func TestWindowStatusHelpQuotesTheEstimate(t *testing.T) {
	if want := fmt.Sprintf("(keys x %d bytes, measured)", kvwindow.BytesPerKey); !strings.Contains(windowStatusUsage, want) {
		t.Errorf("window status -h lacks %q", want)
	}
}
