package main

import (
	"strings"
	"testing"
)

func TestParseRetries(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"none", "# HELP x\ndedupeworker_naks_total{reason=\"holder\"} 0\n", ""},
		{"some", strings.Join([]string{
			`# TYPE dedupeworker_naks_total counter`,
			`dedupeworker_naks_total{reason="window"} 0`,
			`dedupeworker_naks_total{reason="holder"} 1234`,
			`dedupeworker_stale_deliveries_total 7`,
			`dedupeworker_naks_totally_other 9`,
			`dedupeworker_envelopes_total{outcome="unique"} 5000`,
		}, "\n"), `naks_total{reason="holder"}=1234 stale_deliveries_total=7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRetries(strings.NewReader(tc.in))
			if err != nil || got != tc.want {
				t.Fatalf("parseRetries = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
