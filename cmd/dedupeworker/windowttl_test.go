package main

import (
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
)

// The longest claim TTL the worker writes, which its window's buckets must hold: sources without dedupe write none.
func TestWindowLongestTTL(t *testing.T) {
	const def = 72 * time.Hour
	for _, tc := range []struct {
		doc  string
		want time.Duration
	}{
		{"sources: {gh: {dedupe: github}}", def},
		{"sources: {gh: {dedupe: {preset: github, ttl: 168h}}, st: {dedupe: stripe}}", 168 * time.Hour},
		{"sources: {sh: {dedupe: {header: X-Id, ttl: 12h}}}", 12 * time.Hour},
		{"sources: {raw: {}}", 0},
		{"sources: {raw: {}, sh: {dedupe: {header: X-Id, ttl: 1h}}}", time.Hour},
	} {
		src, err := keys.LoadSources([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		if got := longestTTL(src, def); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.doc, got, tc.want)
		}
	}
}
