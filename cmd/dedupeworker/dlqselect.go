package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dedupeworker/dedupeworker/contract"
)

// dlqFailsAgain are the reasons whose replay can only be dead-lettered again, unless the worker's settings changed
// (a new source, a tenant rule): replayed only with --force.
var dlqFailsAgain = []string{contract.DeadBadSubject, contract.DeadBadTenant, contract.DeadBadSource, contract.DeadControlHeader}

// dlqSeqRange is an inclusive range of dead-letter sequences; hi is math.MaxUint64 for an open range ("N-").
type dlqSeqRange struct{ lo, hi uint64 }

// dlqSeqSet is a sorted list of disjoint, non-adjacent ranges. Empty means every sequence.
type dlqSeqSet []dlqSeqRange

// parseDlqSeqs parses what --seq accepts: "N", "N-M" or "N-", comma separated, in any order and overlapping.
func parseDlqSeqs(s string) (dlqSeqSet, error) {
	var set dlqSeqSet
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := parseDlqSeq(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		to := from
		switch {
		case isRange && hi == "":
			to = math.MaxUint64
		case isRange:
			if to, err = parseDlqSeq(hi); err != nil {
				return nil, fmt.Errorf("%q: %v", part, err)
			}
			if to < from {
				return nil, fmt.Errorf("%q: the range ends before it starts", part)
			}
		}
		set = append(set, dlqSeqRange{from, to})
	}
	return set.merged(), nil
}

func parseDlqSeq(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("a sequence is a whole number from 1, got %q", s)
	}
	return n, nil
}

// merged sorts the ranges and joins those that overlap or touch.
func (s dlqSeqSet) merged() dlqSeqSet {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b dlqSeqRange) int { return cmp.Compare(a.lo, b.lo) })
	var out dlqSeqSet
	for _, r := range s {
		if n := len(out); n > 0 && (out[n-1].hi == math.MaxUint64 || r.lo <= out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s dlqSeqSet) contains(seq uint64) bool {
	return len(s) == 0 || slices.ContainsFunc(s, func(r dlqSeqRange) bool { return seq >= r.lo && seq <= r.hi })
}

// dlqSelection is what --reason, --tenant, --source and --seq select; every part narrows it, an empty part
// selects everything.
type dlqSelection struct {
	reasons        []string
	tenant, source string
	seqs           dlqSeqSet
}

// addReasons adds the reasons of one --reason value (a comma list), each of which must be one the worker writes.
func (sel *dlqSelection) addReasons(v string) error {
	for r := range strings.SplitSeq(v, ",") {
		r = strings.TrimSpace(r)
		if reasons := contract.DeadReasons(); !slices.Contains(reasons, r) {
			return fmt.Errorf("--reason %q: not a dead-letter reason (%s)", r, strings.Join(reasons, ", "))
		}
		if !slices.Contains(sel.reasons, r) {
			sel.reasons = append(sel.reasons, r)
		}
	}
	return nil
}

// addSeqs adds the sequences of one --seq value.
func (sel *dlqSelection) addSeqs(v string) error {
	set, err := parseDlqSeqs(v)
	if err == nil {
		sel.seqs = append(sel.seqs, set...).merged()
	}
	return err
}

// filterSubject is the subject filter of the stream reads: one reason is read alone; several, or none, read every
// reason and match here.
func (sel dlqSelection) filterSubject(dlqPrefix string) string {
	if len(sel.reasons) == 1 {
		return contract.DeadLetterSubject(dlqPrefix, sel.reasons[0])
	}
	return contract.All(dlqPrefix)
}

func (sel dlqSelection) match(dl *deadLetter) bool {
	return (len(sel.reasons) == 0 || slices.Contains(sel.reasons, dl.reason)) &&
		(sel.tenant == "" || sel.tenant == dl.tenant) &&
		(sel.source == "" || sel.source == dl.source) &&
		sel.seqs.contains(dl.seq)
}
