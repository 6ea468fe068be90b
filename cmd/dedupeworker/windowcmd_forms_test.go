package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// consumerHeaders publishes the headers the worker would set for key and returns them as a consumer reads them
// from a real server: the form a user copies into --dedupe-key and --idempotency-key.
func consumerHeaders(t *testing.T, nc *nats.Conn, tenant, source, key string) (dedupeKey, idemKey string) {
	t.Helper()
	sub, err := nc.SubscribeSync("out.forms")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	m := nats.NewMsg("out.forms")
	m.Header.Set("Idempotency-Key", keys.IdempotencyHeader(tenant, source, key))
	m.Header.Set("Dedupe-Key", keys.HeaderValue(key))
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return got.Header.Get("Dedupe-Key"), got.Header.Get("Idempotency-Key")
}

func windowGetJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", append([]string{"window", "get"}, args...)...)
	if code != 0 {
		t.Fatalf("window get %q: exit %d: %s", args, code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("window get %q: %v: %s", args, err, stdout)
	}
	return v
}

func TestWindowFormsFindKeysNATSWouldAlter(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_BUCKET", "forms-window")
	nc := natstest.Connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := kvwindow.New(ctx, js, kvwindow.Config{Bucket: "forms-window", Provision: true})
	if err != nil {
		t.Fatal(err)
	}

	stamp := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	type claim struct {
		key      string
		seq      uint64
		stamp    int64
		delivery kvwindow.Delivery
		rev      uint64
	}
	// Each key NATS would alter has a sibling that the unencoded header would be confused with; every claim has
	// its own claimant, so a lookup that lands on the wrong key shows.
	claims := []*claim{
		{key: "order 7 ", seq: 11, stamp: stamp.UnixNano(), delivery: kvwindow.Delivery{Consumer: stamp.UnixNano() - 1e9, Count: 3}},
		{key: "order 7", seq: 12, stamp: stamp.UnixNano() + 1},
		{key: "A\r\nB", seq: 13, stamp: stamp.UnixNano() + 2, delivery: kvwindow.Delivery{Consumer: 1, Count: 1}},
		{key: "A  B", seq: 14}, // what NATS makes of "A\r\nB" unencoded; a claim from an older worker (no stamp)
		{key: " 50% off\t", seq: 15, stamp: stamp.UnixNano() + 3, delivery: kvwindow.Delivery{Count: 2}},
	}
	for _, c := range claims {
		out, err := w.Claim(ctx, kvwindow.Claim{Tenant: "acme", Source: "forms", Key: c.key, TTL: time.Hour,
			Claimant: kvwindow.Claimant{Seq: c.seq, Stamp: c.stamp}, Delivery: c.delivery}, kvwindow.Known{})
		if err != nil || out.Status != kvwindow.Won {
			t.Fatalf("claim %q: %v %v", c.key, out, err)
		}
		c.rev = out.Revision
	}

	check := func(c *claim, how string, got map[string]any) {
		t.Helper()
		if got["claimed"] != true || got["claimant_seq"] != float64(c.seq) || got["revision"] != float64(c.rev) ||
			got["delivery_count"] != float64(c.delivery.Count) {
			t.Errorf("key %q by %s: %v; want claimant_seq %d, revision %d, delivery_count %d", c.key, how, got, c.seq, c.rev, c.delivery.Count)
		}
		if c.stamp == 0 {
			if s, ok := got["claimant_stamp"]; ok {
				t.Errorf("key %q by %s: claimant_stamp %v for a claim without stamp", c.key, how, s)
			}
		} else if want := time.Unix(0, c.stamp).UTC().Format(time.RFC3339Nano); got["claimant_stamp"] != want {
			t.Errorf("key %q by %s: claimant_stamp %v, want %s", c.key, how, got["claimant_stamp"], want)
		}
		if exp, _ := got["expires_in_seconds"].(float64); exp < 3500 || exp > 3600 {
			t.Errorf("key %q by %s: expires_in_seconds %v", c.key, how, got["expires_in_seconds"])
		}
		if at, _ := got["claimed_at"].(string); !strings.HasSuffix(at, "Z") {
			t.Errorf("key %q by %s: claimed_at %q", c.key, how, at)
		} else if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			t.Errorf("key %q by %s: claimed_at: %v", c.key, how, err)
		}
	}
	for _, c := range claims {
		dk, ik := consumerHeaders(t, nc, "acme", "forms", c.key)
		check(c, "--key", windowGetJSON(t, "--tenant", "acme", "--source", "forms", "--key", c.key))
		check(c, "--dedupe-key "+dk, windowGetJSON(t, "--tenant", "acme", "--source", "forms", "--dedupe-key", dk))
		check(c, "--idempotency-key "+ik, windowGetJSON(t, "--idempotency-key", ik))
		check(c, "--idempotency-key with agreeing --tenant/--source",
			windowGetJSON(t, "--idempotency-key", ik, "--tenant", "acme", "--source", "forms"))
	}
	if dk, _ := consumerHeaders(t, nc, "acme", "forms", "A\r\nB"); dk != "A%0D%0AB" {
		t.Errorf("Dedupe-Key of A CR LF B as a consumer reads it: %q", dk)
	}
	// Hand-typed: lowercase escapes and a needless one.
	check(claims[2], "hand-typed", windowGetJSON(t, "--idempotency-key", "acme:forms:%41%0d%0aB"))
	// An unknown key is simply not claimed, and the answer echoes the decoded key it looked for.
	if got := windowGetJSON(t, "--idempotency-key", "acme:forms:A%0D%0AC"); got["claimed"] != false || got["key"] != "A\r\nC" ||
		got["tenant"] != "acme" || got["source"] != "forms" {
		t.Errorf("unclaimed key: %v", got)
	}

	// forget, once with each form; each removes its own key and no sibling.
	forget := func(args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", append([]string{"window", "forget"}, args...)...)
		if code != 0 || strings.TrimSpace(stdout) != `{"forgotten":1}` {
			t.Fatalf("window forget %q: exit %d: %s %s", args, code, stdout, stderr)
		}
	}
	_, ik := consumerHeaders(t, nc, "acme", "forms", "order 7 ")
	forget("--idempotency-key", ik)
	dk, _ := consumerHeaders(t, nc, "acme", "forms", "A\r\nB")
	forget("--tenant", "acme", "--source", "forms", "--dedupe-key", dk)
	forget("--tenant", "acme", "--source", "forms", "--key", " 50% off\t")
	for _, c := range claims {
		got := windowGetJSON(t, "--tenant", "acme", "--source", "forms", "--key", c.key)
		if gone := c.seq == 11 || c.seq == 13 || c.seq == 15; got["claimed"] != !gone {
			t.Errorf("after forget, key %q: %v", c.key, got)
		}
	}
}

func TestWindowFormsUsageErrors(t *testing.T) {
	// Usage errors are found before any connection is made.
	t.Setenv("DEDUPE_NATS_URL", "nats://127.0.0.1:1")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get"}, "window get: --tenant, --source and --key are required (or --dedupe-key instead of --key, or --idempotency-key alone)"},
		{[]string{"get", "--tenant", "a"}, "window get: --source and --key are required"},
		{[]string{"get", "--tenant", "a", "--source", "s"}, "window get: --key is required"},
		{[]string{"get", "--source", "s", "--key", "k"}, "window get: --tenant is required with --key"},
		{[]string{"forget", "--tenant", "a", "--key", "k"}, "window forget: --source is required with --key"},
		{[]string{"get", "--dedupe-key", "k"}, "window get: --tenant and --source are required with --dedupe-key (or --idempotency-key alone)"},
		{[]string{"get", "--tenant", "a", "--source", "s", "--key", "k", "--dedupe-key", "k"}, "--key and --dedupe-key exclude each other: give one"},
		{[]string{"get", "--key", "k", "--dedupe-key", "k", "--idempotency-key", "a:s:k"}, "--key, --dedupe-key and --idempotency-key exclude each other"},
		{[]string{"get", "--tenant", "a", "--source", "s", "--dedupe-key", "a%zz"}, `window get: --dedupe-key: header value "a%zz": malformed escape "%zz" at byte 1`},
		{[]string{"get", "--tenant", "a", "--source", "s", "--dedupe-key", "A\r\nB"}, `raw control byte 0x0D`},
		{[]string{"get", "--tenant", "a", "--source", "s", "--dedupe-key", ""}, "--dedupe-key is empty"},
		{[]string{"get", "--tenant", "a", "--source", "s", "--key", ""}, "--key is empty"},
		{[]string{"get", "--idempotency-key", "msg/INGEST/3"}, "event without a key"},
		{[]string{"get", "--idempotency-key", "a:s:"}, "is empty"},
		{[]string{"get", "--idempotency-key", "a:s:100%"}, `malformed escape "%"`},
		{[]string{"get", "--idempotency-key", "a.b:s:k"}, `tenant "a.b" must be`},
		{[]string{"get", "--idempotency-key", "a:s:k", "--tenant", "b"}, `--tenant "b" disagrees with tenant "a" of --idempotency-key "a:s:k"`},
		{[]string{"forget", "--idempotency-key", "a:s:k", "--source", "t"}, `--source "t" disagrees with source "s"`},
		{[]string{"forget", "--tenant", "a", "--all", "--yes", "--idempotency-key", "a:s:k"}, "--all and --idempotency-key exclude each other"},
		{[]string{"forget", "--tenant", "a", "--all", "--yes", "--key", "k", "--dedupe-key", "k"}, "--all, --key and --dedupe-key exclude each other"},
		{[]string{"forget", "--all", "--yes"}, "window forget: --all needs --tenant"},
		{[]string{"get", "--tenant", "a", "--all"}, "window get: flag provided but not defined: -all"},
		{[]string{"get", "--tenant", "a", "--source", "s.t", "--key", "k"}, `--source "s.t": must be`},
	}
	for _, tc := range cases {
		code, stdout, stderr := runCLI(t, "", append([]string{"window"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want 2 and %q", tc.args, code, stderr, stdout, tc.want)
		}
	}
	code, stdout, _ := runCLI(t, "", "window", "get", "-h") // help is printed on standard output
	for _, want := range []string{"--dedupe-key", "--idempotency-key", "claimant_stamp", "delivery_count"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("window get -h: exit %d, lacks %q", code, want)
		}
	}
}

func TestWindowFormsMissingBucket(t *testing.T) {
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	t.Setenv("DEDUPE_BUCKET", "no-such-window")
	for _, sub := range []string{"get", "forget"} {
		code, stdout, stderr := runCLI(t, "", "window", sub, "--idempotency-key", "a:s:k")
		if code != 1 || stdout != "" || !strings.Contains(stderr, `bucket "no-such-window" does not exist`) ||
			strings.Contains(stderr, "Provision") || strings.Contains(stderr, "provisioning is off") {
			t.Errorf("window %s on a missing bucket: exit %d, %q", sub, code, stderr)
		}
	}
	// The bucket is still missing: the commands never create it.
	js, _ := jetstream.New(natstest.Connect(t, srv.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, "KV_no-such-window"); err == nil {
		t.Error("window commands created the bucket")
	}
}
