package receiver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// A signed timestamp verifies within the tolerance either way, so one delivery verifies for twice the tolerance:
// the shortest TTL that outlasts it. Schemes that sign no timestamp have none.
func TestMinTTL(t *testing.T) {
	for _, tc := range []struct {
		scheme    string
		tolerance time.Duration
		want      time.Duration
	}{
		{"stripe", 0, 10 * time.Minute},
		{"stripe", 10 * time.Minute, 20 * time.Minute},
		{"svix", 0, 10 * time.Minute},
		{"standard_webhooks", 90 * time.Second, 3 * time.Minute},
		{"github", 0, 0},
		{"shopify", 0, 0},
		{"hmac", 0, 0},
		{"none", 0, 0},
	} {
		if got := receiver.MinTTL(tc.scheme, tc.tolerance); got != tc.want {
			t.Errorf("MinTTL(%s, %s) = %s, want %s", tc.scheme, tc.tolerance, got, tc.want)
		}
	}
}

// A source verified with a timestamped scheme whose TTL is shorter than twice its tolerance would publish a
// captured delivery sent again after its event's claim expired, still within the tolerance: ingest refuses it at
// start, naming the source, where its TTL comes from, the tolerance and the minimum; `sources check` (CheckTTL)
// says the same of the file.
func TestTTLShorterThanTwiceTheTolerance(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		def  time.Duration // DEDUPE_DEFAULT_TTL
		want []string      // parts of the error; none: accepted
	}{
		{"stripe ttl 1m", "sources:\n  st: {dedupe: {preset: stripe, ttl: 1m}, verify: stripe}\n", 0,
			[]string{"receiver: sources.st: its dedupe ttl (1m) is shorter than twice the stripe tolerance (5m)", "set a ttl of at least 10m"}},
		{"stripe ttl of exactly twice the tolerance", "sources:\n  st: {dedupe: {preset: stripe, ttl: 10m}, verify: stripe}\n", 0, nil},
		{"a longer tolerance", "sources:\n  st: {dedupe: {preset: stripe, ttl: 15m}, verify: {scheme: stripe, tolerance: 10m}}\n", 0,
			[]string{"ttl (15m) is shorter than twice the stripe tolerance (10m)", "at least 20m"}},
		{"svix under a short DEDUPE_DEFAULT_TTL", "sources:\n  sw: {dedupe: svix, verify: svix}\n", 5 * time.Minute,
			[]string{"sources.sw: its TTL from DEDUPE_DEFAULT_TTL (5m) is shorter than twice the svix tolerance (5m)", "a ttl of at least 10m or raise DEDUPE_DEFAULT_TTL"}},
		{"standard_webhooks, ttl_seconds", "sources:\n  sw: {dedupe: {header: webhook-id, ttl_seconds: 3600}, verify: standard_webhooks}\n", 0, nil},
		{"github signs no timestamp", "sources:\n  gh: {dedupe: {preset: github, ttl: 1s}, verify: github}\n", 0, nil},
		{"stripe without dedupe", "sources:\n  st: {verify: stripe}\n", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mustSources(t, tc.doc)
			_, perr := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secretsOf(t, src), DefaultTTL: tc.def})
			cerr := receiver.CheckTTL(src, false, tc.def)
			for what, err := range map[string]error{"NewPolicy": perr, "CheckTTL": cerr} {
				if len(tc.want) == 0 {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					continue
				}
				var se *receiver.SourceError
				if err == nil || !errors.As(err, &se) || se.Line == 0 {
					t.Fatalf("%s: %v, want a *SourceError with its line", what, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), strings.TrimPrefix(w, "receiver: ")) {
						t.Errorf("%s: %v\nwant %q", what, err, w)
					}
				}
			}
			if len(tc.want) > 0 && !strings.HasPrefix(perr.Error(), "receiver: sources.") {
				t.Errorf("NewPolicy: %v", perr)
			}
		})
	}
}

// With no sources document each preset is a source: a short DEDUPE_DEFAULT_TTL refuses the timestamped presets
// that are served (they have a secret), and CheckTTL names every one of them.
func TestTTLShorterThanTwiceTheTolerancePresets(t *testing.T) {
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_GITHUB=" + ghOld, "DEDUPE_INGEST_SECRET_STRIPE=" + stAcme},
		Sources: keys.PresetSources().IDs()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: keys.PresetSources(), FromPresets: true, Secrets: secrets, DefaultTTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "receiver: preset source stripe: its TTL from DEDUPE_DEFAULT_TTL (1m) is shorter") ||
		strings.Contains(err.Error(), "svix") {
		t.Fatalf("NewPolicy: %v", err)
	}
	err = receiver.CheckTTL(keys.PresetSources(), true, time.Minute)
	for _, id := range []string{"stripe", "svix", "standard_webhooks"} {
		if err == nil || !strings.Contains(err.Error(), "preset source "+id+": ") {
			t.Errorf("CheckTTL: %v, want preset source %s", err, id)
		}
	}
	if err != nil && strings.Contains(err.Error(), "github") {
		t.Errorf("CheckTTL: %v", err)
	}
	if _, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: keys.PresetSources(), FromPresets: true, Secrets: secrets}); err != nil {
		t.Fatalf("NewPolicy with the default TTL: %v", err)
	}
}
