package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// dlqRemovedMeanwhileText says where a dead letter found gone when this command removed it went.
const dlqRemovedMeanwhileText = "by another dlq replay or dlq rm, or the stream's limits"

// dlqRemoval is what one removal of a dead letter is known to have done.
type dlqRemoval int

const (
	dlqRemovedNow         dlqRemoval = iota // the server confirmed this removal
	dlqRemovedMeanwhile                     // the server refused it, the letter gone: removed before it by someone else
	dlqRemovedUnconfirmed                   // no answer, the letter gone: by this removal, or meanwhile by someone else
)

// remove removes dead letter seq from the dead-letter stream. A removal once sent is waited for (its own request
// timeout), even when the command is interrupted: what it reports is what happened. When the removal fails, the
// letter is read again: gone after a removal that did nothing (the server refused it, or nothing took it), it was
// removed meanwhile by someone else; gone after any other failure, either may have removed it (dlqGoneAfter).
func (r *dlqReader) remove(ctx context.Context, seq uint64) (dlqRemoval, error) {
	ctx = context.WithoutCancel(ctx)
	dctx, cancel := context.WithTimeout(ctx, dlqRequestTimeout)
	defer cancel()
	err := r.del(dctx, seq)
	if err == nil {
		return dlqRemovedNow, nil
	}
	if _, found, rerr := r.get(ctx, seq); rerr == nil && !found {
		return dlqGoneAfter(err), nil
	}
	return dlqRemovedNow, err
}

// dlqGoneAfter decides what a removal that failed with err did, its letter since found gone: nothing when the
// server refused it or nothing took the request (the letter was removed meanwhile by someone else); any other
// failure may have landed with its answer lost, so either may have removed it.
func dlqGoneAfter(err error) dlqRemoval {
	if dlqRefusedRemoval(err) || jserr.API(err) != nil || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) {
		return dlqRemovedMeanwhile
	}
	return dlqRemovedUnconfirmed
}

// dlqUnconfirmedText says what a letter found gone after a removal without an answer is known to be.
const dlqUnconfirmedText = "the letter is gone, by this removal (its answer lost) or meanwhile " + dlqRemovedMeanwhileText

// dlqRefusedRemoval reports whether the server answered a removal with a refusal ("no message found" among
// others, which nats.go wraps in ErrMsgDeleteUnsuccessful): it removed nothing then.
func dlqRefusedRemoval(err error) bool {
	return errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) || errors.Is(err, jetstream.ErrMsgNotFound)
}

// Results of removing one dead letter that the summary counts apart.
const (
	dlqRemovedMeanwhileResult = "removed-meanwhile" // removed by another command or the stream's limits first
	dlqGoneResult             = "gone"              // gone after a removal without an answer
)

// dlqRemove removes the selected dead letters (at most --limit) from the dead-letter stream, or, without --yes,
// says which it would remove. A removal is final: the letter's headers and body are gone.
func dlqRemove(ctx context.Context, r *dlqReader, o dlqOptions, now time.Time, stdout, stderr io.Writer) error {
	// With --yes every visited dead letter is either failed or removed (meanwhile, gone or by this command), so
	// the removed count is n-len(failed); tally counts the removals that need a word in the summary.
	tally := map[string]int{}
	var failed []string
	n, next, err := r.scanLimited(ctx, o, stdout, now, "RESULT", func(dl *deadLetter) (any, string, bool) {
		rec := dlqReplayRecord{dlqRecord: dl.record(now), Result: "would-remove"}
		if o.yes {
			switch how, err := r.remove(ctx, dl.seq); {
			case err != nil:
				rec.Result, rec.Detail = "failed", err.Error()
				failed = append(failed, fmt.Sprintf("seq %d (%v)", dl.seq, err))
			case how == dlqRemovedMeanwhile:
				rec.Result, rec.Detail = dlqRemovedMeanwhileResult, "removed meanwhile "+dlqRemovedMeanwhileText
			case how == dlqRemovedUnconfirmed:
				rec.Result, rec.Detail = dlqGoneResult, "no answer to the removal; "+dlqUnconfirmedText
			default:
				rec.Result = "removed"
			}
		}
		tally[rec.Result]++
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
			n, plural(uint64(n), "letter", "letters"), r.name, plural(uint64(n), "it", "them"))
	case len(failed) == n:
		fmt.Fprintf(&b, "removed none of the %d selected dead letters of %s", n, r.name)
	default:
		fmt.Fprintf(&b, "removed %d of the %d selected dead letters from %s", n-len(failed), n, r.name)
		if meanwhile := tally[dlqRemovedMeanwhileResult]; meanwhile > 0 {
			fmt.Fprintf(&b, " (%d of them removed meanwhile by another command or the stream's limits)", meanwhile)
		}
		if unconfirmed := tally[dlqGoneResult]; unconfirmed > 0 {
			fmt.Fprintf(&b, " (%d of them gone without an answer to the removal: removed by it, or meanwhile by another "+
				"command or the stream's limits)", unconfirmed)
		}
	}
	if next > 0 {
		fmt.Fprintf(&b, "; more dead letters match than --limit %d", o.limit)
	}
	fmt.Fprintln(out, b.String())
	if ctx.Err() != nil {
		return failErr(fmt.Errorf("dlq rm: interrupted: %w", ctx.Err()))
	}
	if len(failed) > 0 {
		return failErr(fmt.Errorf("dlq rm: %d of %d selected dead letters not removed: %s", len(failed), n, dlqListed(failed)))
	}
	return nil
}
