package main

import (
	"context"
	"io"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

const windowListUsage = `Usage: dedupeworker window ls --tenant T [--source S] [--limit N] [--from REV] [--timeout D]

Lists the live claims of a tenant (and source), oldest revision first, one JSON object per line (the fields of
window get), at most --limit (default 100, at most 10000). When more remain, a last line
{"next": REV} says where the next page starts: run again with --from REV. It reads only the scope's claims, never
the whole bucket, and never creates the bucket. No output (exit status 0) means the server counts no claim of the
scope; a page the server cannot deliver within --timeout (default 30s; in a bucket of millions of keys it scans
for seconds to find a sparse scope's claims) fails with exit status 1 and says how many it had found.

`

func runWindowList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("window ls", windowListUsage)
	tenant := fs.String("tenant", "", "tenant id (required)")
	source := fs.String("source", "", "source id (default: every source of the tenant)")
	limit := fs.Int("limit", 100, "most claims to print")
	from := fs.Uint64("from", 0, "first revision to list (the next of a previous page)")
	timeout := fs.Duration("timeout", 30*time.Second, "longest the page may take")
	conn := addConnFlags(fs)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return usageErr("window ls: --tenant is required")
	}
	if err := checkIDs("window ls", *tenant, *source, true); err != nil {
		return err
	}
	switch {
	case *limit < 1 || *limit > kvwindow.MaxList:
		return usageErr("window ls: --limit must be between 1 and %d, got %d", kvwindow.MaxList, *limit)
	case *timeout <= 0:
		return usageErr("window ls: --timeout must be positive, got %s", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	b, err := bindWindow(ctx, conn, 0, stderr)
	if err != nil {
		return err
	}
	defer b.nc.Close()
	// With a bucket lost, List gives the other buckets' claims and an error naming it: both are shown.
	entries, next, err := b.w.List(ctx, *tenant, *source, *from, *limit)
	now := time.Now()
	for _, e := range entries {
		if werr := writeJSON(stdout, windowEntryJSON(e, now)); werr != nil {
			return werr
		}
	}
	if next != 0 {
		if werr := writeJSON(stdout, map[string]uint64{"next": next}); werr != nil {
			return werr
		}
	}
	return failErr(err)
}
