package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/kvwindow"
)

// windowGet is what window get prints for a held claim: the claim, and how many copies of its event the workers
// have acknowledged as duplicates of it so far (null when that cannot be read, with the reason beside).
type windowGet struct {
	windowEntry
	CopiesSuppressed *uint64 `json:"copies_suppressed"`
	CopiesUnknown    string  `json:"copies_suppressed_unknown,omitempty"`
}

// copiesReadTimeout bounds the read of the count: a count that cannot be read is printed as unknown, never a
// failure of the command.
const copiesReadTimeout = 5 * time.Second

// copiesStream is the counter stream the worker counts copies in: none with DEDUPE_COUNT_COPIES=false.
func copiesStream(cfg config.Config) string {
	if !cfg.CountCopies {
		return ""
	}
	return kvwindow.CopiesStream(cfg.Bucket)
}

// windowClaimJSON is what window get prints for e, with its count read from the window's counter stream (one for
// all of a sharded window's buckets).
func windowClaimJSON(ctx context.Context, js jetstream.JetStream, e kvwindow.Entry, stream string, now time.Time) windowGet {
	out := windowGet{windowEntry: windowEntryJSON(e, now)}
	ctx, cancel := context.WithTimeout(ctx, copiesReadTimeout)
	defer cancel()
	n, err := kvwindow.Copies(ctx, js, stream, e)
	switch {
	case errors.Is(err, kvwindow.ErrNoCopies):
		out.CopiesUnknown = fmt.Sprintf("unknown: stream %s does not exist, so nothing counts the copies of this window's claims; "+
			"workers count them with DEDUPE_COUNT_COPIES=true, and one started so with DEDUPE_PROVISION=true creates it for its "+
			"window (nats-server 2.12 or later; the replay guard's window has none)", stream)
	case err != nil:
		out.CopiesUnknown = "unknown: " + err.Error()
	default:
		out.CopiesSuppressed = &n
	}
	return out
}
