package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestWindowList(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	js, err := jetstream.New(natstest.Connect(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := kvwindow.New(ctx, js, kvwindow.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := w.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "gh", Key: fmt.Sprint("d-", i), TTL: time.Hour,
			Claimant: kvwindow.Claimant{Seq: uint64(i + 1), Stamp: time.Now().UnixNano()}, Delivery: kvwindow.Delivery{Count: 1}}, kvwindow.Known{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "stripe", Key: "evt_1", TTL: time.Hour,
		Claimant: kvwindow.Claimant{Seq: 9}}, kvwindow.Known{}); err != nil {
		t.Fatal(err)
	}

	lines := func(args ...string) []map[string]any {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", append([]string{"window", "ls"}, args...)...)
		if code != 0 {
			t.Fatalf("window ls %q: exit %d: %s", args, code, stderr)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if l == "" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			out = append(out, v)
		}
		return out
	}
	all := lines("--tenant", "acme")
	if len(all) != 6 {
		t.Fatalf("window ls --tenant acme: %d lines, want 6: %v", len(all), all)
	}
	first := lines("--tenant", "acme", "--source", "gh", "--limit", "3")
	if len(first) != 4 || first[3]["next"] == nil {
		t.Fatalf("first page: %v, want 3 claims and a next line", first)
	}
	if first[0]["bucket"] != "dedupe-window" || first[0]["kv_key"] == "" || first[0]["key"] != "d-0" || first[0]["tenant"] != "acme" {
		t.Errorf("entry %v", first[0])
	}
	rest := lines("--tenant", "acme", "--source", "gh", "--from", fmt.Sprint(first[3]["next"]))
	if len(rest) != 2 || rest[0]["key"] != "d-3" {
		t.Errorf("second page %v, want d-3 and d-4", rest)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--tenant is required"},
		{[]string{"--tenant", "a.b"}, "must be 1-64 characters"},
		{[]string{"--tenant", "acme", "--limit", "0"}, "--limit must be between"},
		{[]string{"--tenant", "acme", "--timeout", "0s"}, "--timeout must be positive"},
	} {
		code, _, stderr := runCLI(t, "", append([]string{"window", "ls"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("window ls %q: exit %d, %q; want exit 2 with %q", c.args, code, stderr, c.want)
		}
	}
}
