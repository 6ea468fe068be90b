package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// dlqRemove removes the selected dead letters (at most --limit) from the dead-letter stream, or, without --yes,
// says which it would remove. A removal is final: the letter's headers and body are gone.
func dlqRemove(ctx context.Context, r *dlqReader, o dlqOptions, now time.Time, stdout, stderr io.Writer) error {
	var (
		removed int
		failed  []string
	)
	n, next, err := r.scanLimited(ctx, o, stdout, now, "RESULT", func(dl *deadLetter) (any, string, bool) {
		rec := dlqReplayRecord{dlqRecord: dl.record(now), Result: "would-remove"}
		if o.yes {
			if err := r.st.DeleteMsg(ctx, dl.seq); err != nil {
				rec.Result, rec.Detail = "failed", err.Error()
				failed = append(failed, fmt.Sprintf("seq %d (%v)", dl.seq, err))
			} else {
				rec.Result = "removed"
				removed++
			}
		}
		return rec, rec.Result, ctx.Err() == nil
	})
	if err != nil {
		return failErr(fmt.Errorf("dlq rm: %w", err))
	}
	out := o.notes(stdout, stderr)
	var b strings.Builder
	switch {
	case n == 0:
		b.WriteString("no dead letter matches the selection: nothing to remove")
	case !o.yes:
		fmt.Fprintf(&b, "dry run: would remove %d selected dead %s from %s. Nothing was changed: add --yes to remove %s",
			n, plural(uint64(n), "letter", "letters"), r.name, map[bool]string{true: "it", false: "them"}[n == 1])
	case removed == 0:
		fmt.Fprintf(&b, "removed none of the %d selected dead letters of %s", n, r.name)
	default:
		fmt.Fprintf(&b, "removed %d of the %d selected dead letters from %s", removed, n, r.name)
	}
	if next > 0 {
		fmt.Fprintf(&b, "; more dead letters match than --limit %d", o.limit)
	}
	fmt.Fprintln(out, b.String())
	if ctx.Err() != nil {
		return failErr(fmt.Errorf("dlq rm: interrupted: %w", ctx.Err()))
	}
	if len(failed) > 0 {
		return failErr(fmt.Errorf("dlq rm: %d of %d selected dead letters not removed: %s", len(failed), n, strings.Join(failed[:min(len(failed), 20)], ", ")))
	}
	return nil
}
