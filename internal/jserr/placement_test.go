package jserr_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/jserr"
)

// The cluster's "no suitable peers for placement" (10005) is told apart from the other refusals and from the
// answers that are not one, however it is wrapped; it is a 400, so Refused reports it too.
func TestNoPlacement(t *testing.T) {
	placement := &jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers,
		Description: "no suitable peers for placement: peers: 1 offline"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"placement refused", placement, true},
		{"placement refused, wrapped", fmt.Errorf("pipeline: create stream INGEST: %w", placement), true},
		{"stream name in use", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamNameInUse}, false},
		{"cluster unavailable", &jetstream.APIError{Code: 503, ErrorCode: jserr.CodeClusterUnavailable}, false},
		{"no answer", context.DeadlineExceeded, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := jserr.NoPlacement(tc.err); got != tc.want {
				t.Errorf("NoPlacement(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	if !jserr.Refused(placement) {
		t.Errorf("Refused(%v) = false; a 400 is a refusal to whoever does not retry it", placement)
	}
}

// The warning names what cannot be placed, its replicas, the server's own text, the causes and the settings that
// decide them: DEDUPE_WINDOW_PLACEMENT (with its value) only where it places the bucket, and no placement tags for
// what has none.
func TestPlacementErrorNamesTheSetting(t *testing.T) {
	refusal := func(text string) error {
		return fmt.Errorf("create: %w", &jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers, Description: text})
	}
	for _, tc := range []struct {
		name          string
		err           *jserr.PlacementError
		want, notWant []string
		setting       string
	}{
		{"stream", &jserr.PlacementError{What: "stream INGEST", Replicas: 3,
			Err: refusal("no suitable peers for placement, peer offline")},
			[]string{"cannot place stream INGEST with 3 replicas (no suitable peers for placement, peer offline)",
				"a server may be offline or not yet known to the meta leader",
				"DEDUPE_REPLICAS is more than the servers available", "retrying"},
			[]string{"tags", "DEDUPE_WINDOW_PLACEMENT"}, "DEDUPE_REPLICAS"},
		{"window without placement", &jserr.PlacementError{What: "bucket dedupe-window", Replicas: 3,
			Err: refusal("no suitable peers for placement")},
			[]string{"cannot place bucket dedupe-window with 3 replicas (no suitable peers for placement)",
				"DEDUPE_REPLICAS is more than the servers available"},
			[]string{"tags", "DEDUPE_WINDOW_PLACEMENT"}, "DEDUPE_REPLICAS"},
		{"window placed in a cluster", &jserr.PlacementError{What: "bucket dedupe-window-01", Replicas: 3,
			Placement: "cluster=nope", Err: refusal("no suitable peers for placement")},
			[]string{"cannot place bucket dedupe-window-01 with 3 replicas (no suitable peers for placement)",
				`DEDUPE_WINDOW_PLACEMENT ("cluster=nope") may name a cluster or tags no server has`,
				"DEDUPE_REPLICAS is more than the servers it selects",
				"offline or not yet known to the meta leader", "retrying"},
			[]string{"servers available"}, "DEDUPE_WINDOW_PLACEMENT"},
		{"window placed by tags", &jserr.PlacementError{What: "bucket dedupe-window", Replicas: 1,
			Placement: "ssd", Err: refusal("no suitable peers for placement, tags not matched ['ssd']")},
			[]string{"(no suitable peers for placement, tags not matched ['ssd'])", `DEDUPE_WINDOW_PLACEMENT ("ssd")`},
			nil, "DEDUPE_WINDOW_PLACEMENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !jserr.NoPlacement(tc.err) {
				t.Errorf("NoPlacement(%v) = false, want the refusal it wraps", tc.err)
			}
			got := tc.err.Error()
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("PlacementError = %q, want it to say %q", got, want)
				}
			}
			for _, not := range tc.notWant {
				if strings.Contains(got, not) {
					t.Errorf("PlacementError = %q, want it not to say %q", got, not)
				}
			}
			if s := tc.err.Setting(); s != tc.setting {
				t.Errorf("Setting() = %q, want %q", s, tc.setting)
			}
		})
	}
}

// A placement refusal that lasts is said once, after the refusals in a row have lasted the bound, counted from the
// first of them: another failure in between starts the count again, and what was said is not said again.
func TestRefusalsLasted(t *testing.T) {
	const after = time.Minute
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type attempt struct {
		at      time.Duration // since t0
		refused bool
		want    bool
	}
	for _, tc := range []struct {
		name     string
		attempts []attempt
	}{
		{"no refusal", []attempt{{0, false, false}, {2 * after, false, false}}},
		{"just refused", []attempt{{0, true, false}}},
		{"not long yet", []attempt{{0, true, false}, {after - time.Second, true, false}}},
		{"lasted", []attempt{{0, true, false}, {after - time.Second, true, false}, {after, true, true}}},
		{"said once", []attempt{{0, true, false}, {after, true, true}, {2 * after, true, false}, {10 * after, true, false}}},
		{"an attempt refused alone does not last", []attempt{{0, false, false}, {2 * after, true, false}}},
		{"another failure starts the count again", []attempt{
			{0, true, false}, {after / 2, false, false}, {after, true, false}, {2*after - time.Second, true, false},
			{2 * after, true, true}}},
		{"said once for a start, even after another failure", []attempt{
			{0, true, false}, {after, true, true}, {after + 1, false, false}, {2 * after, true, false},
			{5 * after, true, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r jserr.Refusals
			for i, a := range tc.attempts {
				if got := r.Lasted(a.refused, t0.Add(a.at), after); got != a.want {
					t.Errorf("attempt %d (at %s, refused %v): Lasted = %v, want %v", i, a.at, a.refused, got, a.want)
				}
			}
		})
	}
}

// The error line of a lasting refusal names what is refused, for how long, and the setting that is the likely cause.
func TestPlacementErrorLasted(t *testing.T) {
	refusal := &jetstream.APIError{Code: 400, ErrorCode: jserr.CodeNoSuitablePeers, Description: "no suitable peers"}
	for _, tc := range []struct {
		err  *jserr.PlacementError
		want string
	}{
		{&jserr.PlacementError{What: "stream INGEST", Replicas: 3, Err: refusal},
			"the cluster has refused to place stream INGEST for 2m0s: DEDUPE_REPLICAS is the likely cause, not a " +
				"server restarting; still retrying"},
		{&jserr.PlacementError{What: "bucket dedupe-window", Replicas: 3, Placement: "cluster=east", Err: refusal},
			"the cluster has refused to place bucket dedupe-window for 2m0s: DEDUPE_WINDOW_PLACEMENT is the likely " +
				"cause, not a server restarting; still retrying"},
	} {
		if got := tc.err.Lasted(jserr.PlacementStuckAfter); got != tc.want {
			t.Errorf("Lasted:\n got %q\nwant %q", got, tc.want)
		}
	}
}
