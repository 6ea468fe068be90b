package main

import (
	"slices"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
)

// longestTTL is the longest claim TTL the worker writes: the longest dedupe TTL of the sources that dedupe, def
// (DEDUPE_DEFAULT_TTL) for those that set none; 0 when none dedupes. The window's buckets must hold a claim that
// long (kvwindow.Config.MaxTTL).
func longestTTL(sources keys.Sources, def time.Duration) time.Duration {
	var ttl time.Duration
	for id, spec := range sources.Specs {
		if !slices.Contains(sources.WithoutDedupe, id) {
			ttl = max(ttl, spec.TTL(def))
		}
	}
	return ttl
}
