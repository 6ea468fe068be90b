package main

import (
	"strings"
	"testing"
)

func TestParseRetries(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"none", "# TYPE dedupeworker_naks_total counter\ndedupeworker_naks_total{reason=\"holder\"} 0\n", ""},
		{"some", strings.Join([]string{
			`# TYPE dedupeworker_naks_total counter`,
			`dedupeworker_naks_total{reason="window"} 0`,
			`dedupeworker_naks_total{reason="holder"} 1234`,
			`# TYPE dedupeworker_stale_deliveries_total counter`,
			`dedupeworker_stale_deliveries_total 7`,
			`dedupeworker_possible_duplicates_total 2`, // no # TYPE: untyped
			`dedupeworker_naks_totally_other 9`,
			`# TYPE dedupeworker_envelopes_total counter`,
			`dedupeworker_envelopes_total{outcome="unique"} 5000`,
		}, "\n") + "\n", `naks_total{reason="holder"}=1234 possible_duplicates_total=2 stale_deliveries_total=7`},
		{"not an exposition", "dedupeworker_naks_total{reason=\"holder\" 5\n", "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRetries(tc.in)
			if tc.want == "error" {
				if err == nil {
					t.Fatalf("parseRetries = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseRetries = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
