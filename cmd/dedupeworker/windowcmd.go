package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

const windowUsage = `Usage:
  dedupeworker window get    --tenant T --source S --key K
  dedupeworker window get    --tenant T --source S --dedupe-key V
  dedupeworker window get    --idempotency-key V
  dedupeworker window ls     --tenant T [--source S] [--limit N] [--from REV] [--timeout D]
  dedupeworker window status [--json] [--timeout D]
  dedupeworker window rebalance [--yes] [--json] [--timeout D]
  dedupeworker window forget (any of the three forms of get)
  dedupeworker window forget --tenant T [--source S] --all --yes

A claim is named by its tenant, source and event key, in exactly one of three forms:
  --key K              the exact event key, as the worker computed it ("key" in what 'dedupeworker key' prints)
  --dedupe-key V       the Dedupe-Key header of a published event, as a consumer reads it; needs --tenant and
                       --source. The header percent-encodes what a header cannot carry: %25 is '%', %0D%0A a CR
                       LF, %20 a space at either end; any percent escape (two hex digits, either case) is decoded
  --idempotency-key V  the Idempotency-Key header of a published event, <tenant>:<source>:<key as in Dedupe-Key>;
                       gives tenant, source and key (--tenant and --source, when given, must agree with it)

get prints one JSON object: {"claimed": true, "tenant": T, "source": S, "key": K, "bucket": B, "kv_key": "...",
"claimant_seq": N, "claimant_stamp": "...", "delivery_count": D, "revision": R, "claimed_at": "...",
"age_seconds": A, "expires_in_seconds": X}, or {"claimed": false, "tenant": T, "source": S, "key": K, "bucket": B}
(what it looked for) when no claim is held. claimant_seq and claimant_stamp identify the input envelope holding
the claim (its sequence in the input stream and when the stream stored it; no claimant_stamp for a claim written
by an older worker); delivery_count is the delivery of that envelope that made or last took over the claim (0: not
recorded). forget removes claims, so that the next delivery of the event is published again (a deliberate
replay), and prints {"forgotten": N}. Neither creates the bucket.

Connection: the flags below, else DEDUPE_NATS_*, else NATS_URL / NATS_* and the nats CLI's selected context,
else the embedded server's address DEDUPE_EMBEDDED_LISTEN (see "Connecting" in docs/reference.md). The window is
DEDUPE_BUCKET (and DEDUPE_WINDOW_SHARDS).

`

// windowTarget is what a window command acts on: one claim (tenant, source, key) or, with all, every claim of a
// tenant (and source).
type windowTarget struct {
	tenant, source, key string
	all                 bool
}

func runWindow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := pickSubcommand("window", windowUsage, []string{"get", "ls", "status", "rebalance", "forget"}, args, stderr)
	switch {
	case err != nil:
		return err
	case sub == "ls":
		return runWindowList(ctx, args[1:], stdout, stderr)
	case sub == "status", sub == "rebalance":
		return runWindowStatus(ctx, sub, args[1:], stdout, stderr)
	}
	fs := newFlagSet("window "+sub, subcommandPage(windowUsage, "window "+sub, nil))
	conn := addConnFlags(fs)
	tg, err := parseWindowArgs(fs, sub, args[1:])
	if err != nil {
		return err
	}

	b, err := bindWindow(ctx, conn, 0, stderr)
	if err != nil {
		return err
	}
	defer b.nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	w := b.w
	if sub == "get" {
		e, ok, err := w.Get(ctx, tg.tenant, tg.source, tg.key)
		if err != nil {
			return failErr(err)
		}
		if !ok {
			// What was looked for, and where (with shards: the key's own bucket), so that a miss on a mistyped key
			// shows the mistake.
			bucket, err := w.BucketOf(tg.tenant, tg.source, tg.key)
			if err != nil {
				return failErr(err)
			}
			return writeJSON(stdout, windowMiss{Tenant: tg.tenant, Source: tg.source, Key: tg.key, Bucket: bucket})
		}
		return writeJSON(stdout, windowEntryJSON(e, time.Now()))
	}
	var n int
	if tg.all {
		n, err = w.ForgetAll(ctx, tg.tenant, tg.source)
	} else {
		n, err = w.Forget(ctx, tg.tenant, tg.source, tg.key)
	}
	switch {
	case err == nil:
		return writeJSON(stdout, map[string]int{"forgotten": n})
	case n > 0 && errors.Is(err, kvwindow.ErrWindowLost):
		// A bucket lost holds nothing to forget; the others were purged.
		err = fmt.Errorf("forgot %d keys in the buckets left, but: %w", n, err)
	case n > 0:
		// Shards purged before the failure stay purged: say how many keys went, and that the server may still
		// finish the rest of a purge it did not answer in time.
		err = fmt.Errorf("forgot %d keys, then: %w (a purge the server did not answer in time may still "+
			"complete: window ls shows what is left)", n, err)
	}
	return failErr(err)
}

// windowMiss is what window get prints when no claim is held: the claim it looked for.
type windowMiss struct {
	Claimed bool   `json:"claimed"`
	Tenant  string `json:"tenant"`
	Source  string `json:"source"`
	Key     string `json:"key"`
	Bucket  string `json:"bucket"`
}

// windowEntry is what window get (and each line of window ls) prints for a held claim.
type windowEntry struct {
	Claimed       bool   `json:"claimed"`
	Tenant        string `json:"tenant"`
	Source        string `json:"source"`
	Key           string `json:"key"`
	Bucket        string `json:"bucket"` // the bucket holding the claim: with shards, the key's shard
	KVKey         string `json:"kv_key"` // nats kv get|history <bucket> <kv_key>
	ClaimantSeq   uint64 `json:"claimant_seq"`
	ClaimantStamp string `json:"claimant_stamp,omitempty"` // RFC 3339 time the input stream stored the envelope
	DeliveryCount uint64 `json:"delivery_count"`           // 0: not recorded (a claim written by an older worker)
	Revision      uint64 `json:"revision"`
	ClaimedAt     string `json:"claimed_at"`
	AgeSeconds    int64  `json:"age_seconds"`
	ExpiresIn     int64  `json:"expires_in_seconds"`
}

func windowEntryJSON(e kvwindow.Entry, now time.Time) windowEntry {
	out := windowEntry{
		Claimed: true, Tenant: e.Tenant, Source: e.Source, Key: e.Key, Bucket: e.Bucket, KVKey: e.KVKey,
		ClaimantSeq: e.Claimant.Seq, DeliveryCount: e.Delivery.Count, Revision: e.Revision,
		ClaimedAt:  e.ClaimedAt.UTC().Format(time.RFC3339Nano),
		AgeSeconds: int64(math.Max(0, now.Sub(e.ClaimedAt).Seconds())),
		ExpiresIn:  int64(math.Max(0, math.Ceil(e.ExpiresAt().Sub(now).Seconds()))),
	}
	if e.Claimant.Stamp != 0 {
		out.ClaimantStamp = time.Unix(0, e.Claimant.Stamp).UTC().Format(time.RFC3339Nano)
	}
	return out
}

// parseWindowArgs parses and checks the flags of window get/forget (everything after the subcommand). Each error
// says exactly what is missing or wrong.
func parseWindowArgs(fs *flag.FlagSet, sub string, args []string) (windowTarget, error) {
	tenant := fs.String("tenant", "", "tenant id")
	source := fs.String("source", "", "source id")
	key := fs.String("key", "", "the exact event key")
	dedupeKey := fs.String("dedupe-key", "", "the Dedupe-Key header value (percent-encoded key); needs --tenant and --source")
	idemKey := fs.String("idempotency-key", "", "the Idempotency-Key header value: <tenant>:<source>:<percent-encoded key>")
	all, yes := new(bool), new(bool) // forget's alone: get's help does not list them
	if sub == "forget" {
		all = fs.Bool("all", false, "forget every claim of the tenant (and source, when given)")
		yes = fs.Bool("yes", false, "confirm --all")
	}
	if err := parseFlagsOnly(fs, args); err != nil {
		return windowTarget{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var forms []string // the key forms given, in usage order
	for _, name := range []string{"key", "dedupe-key", "idempotency-key"} {
		if set[name] {
			forms = append(forms, "--"+name)
		}
	}
	bad := func(format string, a ...any) error {
		return usageErr("window %s: %s", sub, fmt.Sprintf(format, a...))
	}
	if err := checkIDs("window "+sub, *tenant, *source, true); err != nil {
		return windowTarget{}, err
	}

	if *all {
		switch {
		case len(forms) > 0:
			return windowTarget{}, bad("%s exclude each other", joinWords(append([]string{"--all"}, forms...), "and"))
		case *tenant == "":
			return windowTarget{}, bad("--all needs --tenant")
		case !*yes && *source != "":
			return windowTarget{}, bad("--all removes every claim of tenant %q and source %q; add --yes to confirm", *tenant, *source)
		case !*yes:
			return windowTarget{}, bad("--all removes every claim of tenant %q, of every source; add --yes to confirm", *tenant)
		}
		return windowTarget{tenant: *tenant, source: *source, all: true}, nil
	}
	var miss []string // of --tenant and --source
	if *tenant == "" {
		miss = append(miss, "--tenant")
	}
	if *source == "" {
		miss = append(miss, "--source")
	}
	switch len(forms) {
	case 0:
		return windowTarget{}, bad("%s required (or --dedupe-key instead of --key, or --idempotency-key alone)", isAre(append(miss, "--key")))
	case 1:
	default:
		return windowTarget{}, bad("%s exclude each other: give one", joinWords(forms, "and"))
	}

	if set["idempotency-key"] {
		t, s, k, err := keys.ParseIdempotencyHeader(*idemKey)
		switch {
		case err != nil:
			return windowTarget{}, bad("--idempotency-key: %v", err)
		case *tenant != "" && *tenant != t:
			return windowTarget{}, bad("--tenant %q disagrees with tenant %q of --idempotency-key %q", *tenant, t, *idemKey)
		case *source != "" && *source != s:
			return windowTarget{}, bad("--source %q disagrees with source %q of --idempotency-key %q", *source, s, *idemKey)
		}
		return windowTarget{tenant: t, source: s, key: k}, nil
	}

	form, k := "--key", *key
	if set["dedupe-key"] {
		form = "--dedupe-key"
		var err error
		if k, err = keys.ParseHeaderValue(*dedupeKey); err != nil {
			return windowTarget{}, bad("--dedupe-key: %v", err)
		}
	}
	switch {
	case len(miss) > 0:
		return windowTarget{}, bad("%s required with %s (or --idempotency-key alone)", isAre(miss), form)
	case k == "":
		return windowTarget{}, bad("%s is empty: an event key never is", form)
	}
	return windowTarget{tenant: *tenant, source: *source, key: k}, nil
}

// joinWords lists words in prose, the last two joined by conj: "a, b or c".
func joinWords(words []string, conj string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

// isAre is joinWords with its verb: "--a is", "--a and --b are".
func isAre(names []string) string {
	if len(names) == 1 {
		return names[0] + " is"
	}
	return joinWords(names, "and") + " are"
}

// boundWindow is what a window command works with: the settings, the connection (closed by the caller) and the
// window.
type boundWindow struct {
	cfg config.Config
	nc  *nats.Conn
	js  jetstream.JetStream
	w   *kvwindow.Manager
}

// bindWindow loads the settings, connects and binds to the window, each of its requests bounded by timeout (0:
// the window's default). It never creates a bucket: a missing bucket is an error worth seeing.
func bindWindow(ctx context.Context, conn *connFlags, timeout time.Duration, stderr io.Writer) (*boundWindow, error) {
	cfg, nc, err := conn.connectCommand(ctx, "dedupeworker window", stderr)
	if err != nil {
		return nil, err
	}
	b := &boundWindow{cfg: cfg, nc: nc}
	if b.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, failErr(err)
	}
	wcfg := windowConfig(cfg)
	wcfg.Timeout = timeout
	if b.w, err = kvwindow.NewManager(ctx, b.js, wcfg); err == nil {
		return b, nil
	}
	defer nc.Close()
	// kvwindow's own message suggests enabling provisioning, which these commands never do. A sharded window has
	// no bucket named DEDUPE_BUCKET itself: its own error names the shard at fault.
	if _, serr := b.js.Stream(ctx, "KV_"+cfg.Bucket); cfg.WindowShards <= 1 && errors.Is(serr, jetstream.ErrStreamNotFound) {
		return nil, failErr(fmt.Errorf("kvwindow: bucket %q does not exist: no worker has started on this window yet, or "+
			"the bucket was deleted with its claims (OPERATIONS.md, \"The window bucket was lost or re-created\"); check "+
			"DEDUPE_BUCKET and DEDUPE_NATS_URL (the window commands never create the bucket; the worker does on "+
			"start, with DEDUPE_PROVISION=true)", cfg.Bucket))
	}
	return nil, failErr(err)
}
