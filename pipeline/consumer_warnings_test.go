package pipeline_test

import (
	"slices"
	"testing"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// Which of a consumer's warnings are logged when it is read (bound, or by the status poll): each once per
// consumer and per edit. The bind used to log only a consumer new to it, so an edit in place followed by a rebind
// before the next poll went unsaid (the "rebind after an edit" row).
func TestWarningsToLog(t *testing.T) {
	limit, wait, limit7 := "has a delivery limit 5", "ack wait differs", "has a delivery limit 7"
	for _, tc := range []struct {
		name                  string
		recorded, provisioned bool
		recCreated            int64
		recWarns              []string
		created               int64
		now, want             []string
	}{
		{"first read", false, false, 0, nil, 1, []string{limit, wait}, []string{limit, wait}},
		{"logged by provisioning", true, true, 1, nil, 1, []string{limit}, nil},
		{"read again, unchanged", true, false, 1, []string{limit, wait}, 1, []string{limit, wait}, nil},
		{"rebind after an edit", true, false, 1, []string{wait}, 1, []string{limit, wait}, []string{limit}},
		{"limit edited to another value", true, false, 1, []string{limit}, 1, []string{limit7}, []string{limit7}},
		{"created again", true, false, 1, []string{limit}, 2, []string{limit}, []string{limit}},
		{"edited to warn of nothing", true, false, 1, []string{limit}, 1, nil, nil},
	} {
		got := pipeline.WarningsToLog(tc.recorded, tc.provisioned, tc.recCreated, tc.recWarns, tc.created, tc.now)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: logged %q, want %q", tc.name, got, tc.want)
		}
	}
}
