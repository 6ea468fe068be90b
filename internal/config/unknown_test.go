package config_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

func TestUnknownVariables(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    []config.Unknown
	}{
		{"typos", []string{"DEDUPE_DEFALT_TTL=1h", "DEDUPE_REPLICA=3", "HOME=/root"},
			[]config.Unknown{{"DEDUPE_DEFALT_TTL", "DEDUPE_DEFAULT_TTL"}, {"DEDUPE_REPLICA", "DEDUPE_REPLICAS"}}},
		{"nothing close", []string{"DEDUPE_COMPLETELY_DIFFERENT=1"}, []config.Unknown{{"DEDUPE_COMPLETELY_DIFFERENT", ""}}},
		{"settings, secrets and test switches", []string{"DEDUPE_REPLICAS=3", "DEDUPE_INGEST_SECRET_GITHUB=x",
			"DEDUPE_SEED=1", "DEDUPE_NATS_URL=", "NATS_URL=x", "DEDUPEX=1"}, nil},
		{"the wrong prefix of a real one", []string{"DEDUPE_WINDOW_BUCKET=w"}, []config.Unknown{{"DEDUPE_WINDOW_BUCKET", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := config.UnknownVariables(tc.environ); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		72 * time.Hour: "72h", 2 * time.Minute: "2m", 90 * time.Second: "1m30s", 250 * time.Millisecond: "250ms",
		time.Hour + time.Second: "1h0m1s", 30 * time.Second: "30s", 0: "0s", 11 * time.Minute: "11m",
	} {
		if got := config.FormatDuration(d); got != want {
			t.Errorf("%d: %q, want %q", d, got, want)
		}
	}
}
