package ident_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/ident"
)

// Names and prefixes: the worker's settings, the receiver and the pipeline accept the same ones.
func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		s            string
		name, prefix bool
	}{
		{"INGEST", true, true},
		{"dedupe_window-2", true, true},
		{"ingest.acme", false, true},
		{"a.b.c", false, true},
		{"", false, false},
		{".ingest", false, false},
		{"ingest.", false, false},
		{"in..gest", false, false},
		{"in*", false, false},
		{"in.>", false, false},
		{"in gest", false, false},
		{"in/gest", false, false},
		{"ingést", false, false},
		{strings.Repeat("a", 255), true, true},
		{strings.Repeat("a", 256), false, true},
	} {
		if got := ident.ValidName(tc.s); got != tc.name {
			t.Errorf("ValidName(%q) = %v, want %v", tc.s, got, tc.name)
		}
		if got := ident.ValidPrefix(tc.s); got != tc.prefix {
			t.Errorf("ValidPrefix(%q) = %v, want %v", tc.s, got, tc.prefix)
		}
	}
}

// The rules are the grammar the settings' docs state: the regular expressions they are written as.
func FuzzValidNames(f *testing.F) {
	name := regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	prefix := regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	for _, s := range []string{"INGEST", "a.b", "", ".", "a..b", "a.*", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ident.ValidName(s), name.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, the grammar says %v", s, got, want)
		}
		if got, want := ident.ValidPrefix(s), prefix.MatchString(s); got != want {
			t.Errorf("ValidPrefix(%q) = %v, the grammar says %v", s, got, want)
		}
	})
}

// Prefixes overlap when one's subjects are among the other's.
func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"ingest", "ingest", true},
		{"ingest", "ingest.acme", true},
		{"ingest.acme", "ingest", true},
		{"ingest", "ingested", false},
		{"deduped", "ingest", false},
	} {
		if got := ident.Overlaps(tc.a, tc.b); got != tc.want {
			t.Errorf("Overlaps(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
