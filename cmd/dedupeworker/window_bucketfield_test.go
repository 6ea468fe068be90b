package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// In a sharded window, window get and each line of window ls name the shard bucket that holds the claim (the one
// `nats kv get <bucket> <kv_key>` reads), and a miss names the bucket it looked in. Before the fix they named
// DEDUPE_BUCKET, which no bucket of a sharded window is called.
func TestWindowBucketFieldSharded(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	_, w, want := shardedWindow(t, 4, keys...)
	type line struct {
		Claimed bool   `json:"claimed"`
		Key     string `json:"key"`
		Bucket  string `json:"bucket"`
	}
	for _, k := range append(keys, "never-claimed") {
		code, stdout, stderr := runCLI(t, "", "window", "get", "--tenant", "acme", "--source", "gh", "--key", k)
		var got line
		if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil {
			t.Fatalf("window get %s: exit %d: %s%s", k, code, stdout, stderr)
		}
		wantBucket, _ := w.BucketOf("acme", "gh", k)
		if got.Bucket != wantBucket {
			t.Errorf("window get %s (claimed %v): bucket %q, want %q", k, got.Claimed, got.Bucket, wantBucket)
		}
	}
	code, stdout, stderr := runCLI(t, "", "window", "ls", "--tenant", "acme")
	if code != 0 {
		t.Fatalf("window ls: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(keys) {
		t.Fatalf("window ls: %d lines, want %d:\n%s", len(lines), len(keys), stdout)
	}
	for _, l := range lines {
		var got line
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		if got.Bucket != want[got.Key] {
			t.Errorf("window ls, key %s: bucket %q, want %q", got.Key, got.Bucket, want[got.Key])
		}
	}
}
