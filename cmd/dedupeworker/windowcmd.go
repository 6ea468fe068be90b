package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

const windowUsage = `Usage:
  dedupeworker window get    --tenant T --source S --key K
  dedupeworker window forget --tenant T --source S --key K
  dedupeworker window forget --tenant T [--source S] --all --yes

get prints {"claimed": true, "claimant_seq": N, "revision": R, "claimed_at": "...", "expires_in_seconds": X}
or {"claimed": false}. forget removes claims, so that the next delivery of the event is published again (a
deliberate replay), and prints {"forgotten": N}. K is the event key as the worker computed it (what
'dedupeworker key' prints and what the Dedupe-Key header carries).

Connection settings are the worker's: DEDUPE_NATS_URL (when empty, the embedded server's address
DEDUPE_EMBEDDED_LISTEN), DEDUPE_NATS_CREDS, DEDUPE_NATS_NKEY_SEED_FILE, DEDUPE_NATS_TLS_*, and DEDUPE_BUCKET.

`

func runWindow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, windowUsage)
		return usageErr("window: a subcommand is required: get or forget")
	}
	sub := args[0]
	switch sub {
	case "get", "forget":
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, windowUsage)
		return errHelpShown
	default:
		return usageErr("window: unknown subcommand %q (get or forget)", sub)
	}
	fs := newFlagSet("window "+sub, windowUsage, stderr)
	tenant := fs.String("tenant", "", "tenant id")
	source := fs.String("source", "", "source id")
	key := fs.String("key", "", "event key")
	all := fs.Bool("all", false, "forget every claim of the tenant (and source, when given)")
	yes := fs.Bool("yes", false, "confirm --all")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("window %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if !keys.ValidID(*tenant) {
		return usageErr("window %s: --tenant %q: must be 1-64 characters of [A-Za-z0-9_-]", sub, *tenant)
	}
	if *source != "" && !keys.ValidID(*source) {
		return usageErr("window %s: --source %q: must be 1-64 characters of [A-Za-z0-9_-]", sub, *source)
	}
	switch {
	case sub == "get" && *all:
		return usageErr("window get: --all is only for forget")
	case *all && *key != "":
		return usageErr("window forget: --all and --key exclude each other")
	case *all && !*yes:
		return usageErr("window forget: --all removes every claim of tenant %q; add --yes to confirm", *tenant)
	case !*all && (*source == "" || *key == ""):
		return usageErr("window %s: --source and --key are required", sub)
	}

	cfg, err := config.Load()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	url := cfg.NatsURL
	if url == "" {
		url = "nats://" + cfg.EmbeddedListen
	}
	nc, err := natsconn.Connect(natsconn.Config{
		URL: url, Creds: cfg.NatsCreds, NkeySeedFile: cfg.NatsNkeySeedFile,
		TLSCA: cfg.NatsTLSCa, TLSCert: cfg.NatsTLSCert, TLSKey: cfg.NatsTLSKey,
		Name: "dedupeworker window", ConnectTimeout: 5 * time.Second,
	})
	if err != nil {
		return failErr(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return failErr(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// Never create a bucket from an inspection command: a missing bucket is an error worth seeing.
	w, err := kvwindow.New(ctx, js, kvwindow.Config{Bucket: cfg.Bucket, Provision: false})
	if err != nil {
		return failErr(err)
	}
	if sub == "get" {
		e, ok, err := w.Get(ctx, *tenant, *source, *key)
		if err != nil {
			return failErr(err)
		}
		if !ok {
			return writeJSON(stdout, map[string]any{"claimed": false})
		}
		return writeJSON(stdout, struct {
			Claimed     bool   `json:"claimed"`
			ClaimantSeq uint64 `json:"claimant_seq"`
			Revision    uint64 `json:"revision"`
			ClaimedAt   string `json:"claimed_at"`
			ExpiresIn   int64  `json:"expires_in_seconds"`
		}{true, e.Claimant, e.Revision, e.ClaimedAt.UTC().Format(time.RFC3339Nano),
			int64(math.Max(0, math.Ceil(time.Until(e.ExpiresAt()).Seconds())))})
	}
	var n int
	if *all {
		n, err = w.ForgetAll(ctx, *tenant, *source)
	} else {
		n, err = w.Forget(ctx, *tenant, *source, *key)
	}
	if err != nil {
		return failErr(err)
	}
	return writeJSON(stdout, map[string]int{"forgotten": n})
}

const sourcesUsage = `Usage: dedupeworker sources check [FILE]

Validates a sources file (FILE, else DEDUPE_SOURCES_FILE, else DEDUPE_SOURCES), prints each source with its
resolved dedupe spec and TTL, lists the sources without dedupe, and exits with status 2 and the worker's own
boot error when the file is invalid.

`

func runSources(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stderr, sourcesUsage)
			return errHelpShown
		}
		fmt.Fprint(stderr, sourcesUsage)
		return usageErr("sources: the only subcommand is check")
	}
	fs := newFlagSet("sources check", sourcesUsage, stderr)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErr("sources check: at most one FILE")
	}
	var (
		doc  []byte
		from string
		err  error
	)
	switch {
	case fs.NArg() == 1:
		from = fs.Arg(0)
		doc, err = os.ReadFile(from)
	case os.Getenv("DEDUPE_SOURCES_FILE") != "" && os.Getenv("DEDUPE_SOURCES") != "":
		return usageErr("config: DEDUPE_SOURCES: set either DEDUPE_SOURCES or DEDUPE_SOURCES_FILE, not both")
	case os.Getenv("DEDUPE_SOURCES_FILE") != "":
		from = os.Getenv("DEDUPE_SOURCES_FILE")
		doc, err = os.ReadFile(from)
	case os.Getenv("DEDUPE_SOURCES") != "":
		from, doc = "DEDUPE_SOURCES", []byte(os.Getenv("DEDUPE_SOURCES"))
	default:
		return usageErr("sources check: no FILE, and neither DEDUPE_SOURCES_FILE nor DEDUPE_SOURCES is set")
	}
	if err != nil {
		return usageErr("sources check: %v", err)
	}
	src, err := keys.LoadSources(doc)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	def := keys.DefaultTTL
	if v := os.Getenv("DEDUPE_DEFAULT_TTL"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	fmt.Fprintf(stdout, "%s: %d sources\n", from, len(src.Specs))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tDEDUPE\tTTL")
	for _, id := range src.IDs() {
		s, _ := src.Lookup(id)
		if !s.Enabled() {
			fmt.Fprintf(tw, "%s\tnone\t-\n", id)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", id, s.String(), formatTTL(s.TTL(def)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(src.Specs) == 0 {
		fmt.Fprintf(stdout, "no source declared: the worker would declare one per preset (%v)\n", keys.Presets())
	}
	if len(src.WithoutDedupe) > 0 {
		fmt.Fprintf(stdout, "sources without dedupe (every provider retry becomes a new event): %v\n", slices.Clone(src.WithoutDedupe))
	}
	return nil
}

// formatTTL prints durations the way people write them in a sources file (72h, 90m, 45s).
func formatTTL(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return fmt.Sprintf("%ds", d/time.Second)
	}
}
