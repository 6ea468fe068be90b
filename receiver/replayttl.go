package receiver

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// MinTTL is the shortest TTL under which a captured delivery of a source verified with scheme and tolerance
// (zero: verify.DefaultTolerance) cannot be published again: twice the tolerance, for which one delivery verifies
// (docs/sources.md, "A TTL at least twice the tolerance"); 0 for the schemes that sign no timestamp.
func MinTTL(scheme string, tolerance time.Duration) time.Duration {
	if !verify.Timestamped(scheme) {
		return 0
	}
	return 2 * cmp.Or(tolerance, verify.DefaultTolerance)
}

// ttlFault is a source's TTL that is shorter than MinTTL of its verify block, as a *SourceError naming the setting
// the TTL comes from (the dedupe spec's ttl, else DEDUPE_DEFAULT_TTL, def), the tolerance and the minimum; nil when
// it is long enough, or the source has no dedupe (no claim to outlast).
func ttlFault(place string, line int, vs keys.VerifySpec, spec keys.Spec, def time.Duration) error {
	least := MinTTL(vs.Scheme, vs.Tolerance)
	if !spec.Enabled() || least == 0 {
		return nil
	}
	ttl, own := spec.OwnTTL()
	from, fix := "its dedupe ttl", "set a ttl of at least "+shortDuration(least)
	if !own {
		ttl = cmp.Or(def, keys.DefaultTTL)
		from, fix = "its TTL from DEDUPE_DEFAULT_TTL", "give its dedupe spec a ttl of at least "+shortDuration(least)+
			" or raise DEDUPE_DEFAULT_TTL"
	}
	if ttl >= least {
		return nil
	}
	return &SourceError{Place: place, Line: line, Reason: fmt.Sprintf(
		"%s (%s) is shorter than twice the %s tolerance (%s): a signed delivery verifies for %s, so a captured one "+
			"sent again after its event's claim expired would be published as a new event; %s (or shorten the "+
			"verify tolerance)", from, shortDuration(ttl), vs.Scheme, shortDuration(cmp.Or(vs.Tolerance, verify.DefaultTolerance)),
		shortDuration(least), fix)}
}

// CheckTTL checks that the TTL of every source of a sources document (or the presets, fromPresets) is at least
// MinTTL, as NewPolicy does, for `dedupeworker sources check`; def is DEDUPE_DEFAULT_TTL. The errors, one per
// source in the order of Sources.IDs, are *SourceError, joined.
func CheckTTL(src keys.Sources, fromPresets bool, def time.Duration) error {
	var errs []error
	for _, id := range src.IDs() {
		vs, ok := verifySpec(src, id, fromPresets)
		if !ok {
			continue
		}
		if err := ttlFault(sourcePlace(id, fromPresets), src.Line[id], vs, src.Specs[id], def); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sourcePlace names a source in a *SourceError: "sources.<id>", or "preset source <id>" with no sources document.
func sourcePlace(id string, fromPresets bool) string {
	if fromPresets {
		return "preset source " + id
	}
	return "sources." + id
}

// shortDuration prints a duration as a sources file writes it: 10m, not 10m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
