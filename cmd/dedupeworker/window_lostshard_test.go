package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// With one shard bucket of a window deleted (its claims lost), the window commands still answer for the other
// buckets and report the lost one: status lists it as lost, get and forget of a key in another bucket work, a
// key in the lost one fails naming it, ls lists the other buckets' claims and then fails naming it. Before the
// fix every window command failed at bind (the shard missing beside its siblings).
func TestWindowCommandsWithLostShard(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	js, _, bucketOf := shardedWindow(t, 4, keys...)
	lost := bucketOf["a"]
	if err := js.DeleteKeyValue(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	var alive []string // keys in the buckets left
	for _, k := range keys {
		if bucketOf[k] != lost {
			alive = append(alive, k)
		}
	}

	code, stdout, stderr := runCLI(t, "", "window", "status", "--json")
	if code != 0 {
		t.Fatalf("window status: exit %d: %s", code, stderr)
	}
	var st struct {
		Buckets []struct {
			Bucket string `json:"bucket"`
			Keys   uint64 `json:"keys"`
			Lost   string `json:"lost"`
		} `json:"buckets"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || len(st.Buckets) != 4 {
		t.Fatalf("window status: %v: %s", err, stdout)
	}
	var total uint64
	for _, b := range st.Buckets {
		if (b.Bucket == lost) != (b.Lost != "") {
			t.Errorf("window status: bucket %s lost %q (%s is the one lost)", b.Bucket, b.Lost, lost)
		}
		total += b.Keys
	}
	if total != uint64(len(alive)) {
		t.Errorf("window status: %d keys, want the %d of the buckets left", total, len(alive))
	}
	if code, stdout, _ := runCLI(t, "", "window", "status"); code != 0 || !strings.Contains(stdout, "LOST") {
		t.Errorf("window status (table): exit %d, no LOST:\n%s", code, stdout)
	}

	if code, stdout, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", alive[0]); code != 0 ||
		!strings.Contains(stdout, `"claimed":true`) {
		t.Errorf("window get of a key in a bucket left: exit %d: %s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", "a"); code != exitFailure ||
		!strings.Contains(stderr, lost) || !strings.Contains(stderr, "bucket lost") {
		t.Errorf("window get of a key in the lost bucket: exit %d: %s", code, stderr)
	}

	code, stdout, stderr = runCLI(t, "", "window", "ls", "--tenant", "acme")
	if n := strings.Count(stdout, `"claimed":true`); code != exitFailure || n != len(alive) || !strings.Contains(stderr, lost) {
		t.Errorf("window ls: exit %d, %d claims (want %d, then a failure naming %s):\n%s%s", code, n, len(alive), lost, stdout, stderr)
	}

	if code, stdout, stderr := runCLI(t, "", "window", "forget", "--tenant", "acme", "--source", "gh", "--key", alive[0]); code != 0 ||
		!strings.Contains(stdout, `{"forgotten":1}`) {
		t.Errorf("window forget of a key in a bucket left: exit %d: %s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "", "window", "forget", "--tenant", "acme", "--all", "--yes")
	if code != exitFailure || !strings.Contains(stderr, fmt.Sprintf("forgot %d keys in the buckets left", len(alive)-1)) || !strings.Contains(stderr, lost) {
		t.Errorf("window forget --all: exit %d: %s", code, stderr)
	}
}
