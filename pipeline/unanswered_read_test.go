package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// TestUnansweredReadKeepsVerdict: a read of a stream that fails (unanswered, or answered without a leader) leaves
// the verdict of its leader's last answer standing, and a stream whose reads have failed for 2s, with no answer
// between, is reported; one slow read is not. Before, a failed read dropped the verdict: the worker was ready while
// the output's leader was cut off (TestReadinessOutputLeaderSteppedDown).
func TestUnansweredReadKeepsVerdict(t *testing.T) {
	const s = time.Second
	cut := "its leader n1 has lost its quorum (n2 offline, n3 offline; 2 of 3 needed)"
	timeout := context.DeadlineExceeded
	offline := errors.New("nats: connection closed")
	for _, tc := range []struct {
		name       string
		reads      []pipeline.StreamRead
		cut, quiet string // substrings of what is reported ("": nothing)
	}{
		{name: "answered, quorum", reads: []pipeline.StreamRead{{At: s}}},
		{name: "answered, cut off", reads: []pipeline.StreamRead{{At: s, CutOff: cut}}, cut: cut},
		{name: "cut off, then one read unanswered", reads: []pipeline.StreamRead{{At: s, CutOff: cut}, {At: 3 * s, Err: timeout}},
			cut: cut + " (its leader's last answer, 2s ago; none since: context deadline exceeded)"},
		{name: "cut off, then unanswered for 2s", reads: []pipeline.StreamRead{{At: s, CutOff: cut}, {At: 3 * s, Err: timeout}, {At: 5 * s, Err: timeout}},
			cut: "its leader's last answer, 4s ago", quiet: "no answer from its leader for 2s"},
		{name: "cut off, then answered with its quorum", reads: []pipeline.StreamRead{{At: s, CutOff: cut}, {At: 3 * s, Err: timeout}, {At: 5 * s}}},
		{name: "one slow read", reads: []pipeline.StreamRead{{At: s}, {At: 3 * s, Err: timeout}}},
		{name: "two reads failing at once", reads: []pipeline.StreamRead{{At: 3 * s, Err: timeout}, {At: 3*s + 10*time.Millisecond, Err: timeout}}},
		{name: "unanswered for 2s", reads: []pipeline.StreamRead{{At: s}, {At: 3 * s, Err: timeout}, {At: 5 * s, Err: timeout}},
			quiet: "no answer from its leader for 2s (its leader out of reach, or none elected; the worker resumes by itself): context deadline exceeded"},
		{name: "never answered", reads: []pipeline.StreamRead{{At: s, Err: timeout}, {At: 3 * s, Err: timeout}}, quiet: "no answer from its leader for 2s"},
		{name: "answered between failures", reads: []pipeline.StreamRead{{At: s, Err: timeout}, {At: 2 * s}, {At: 3 * s, Err: timeout}}},
		{name: "the connection's failure says nothing", reads: []pipeline.StreamRead{{At: s, CutOff: cut}, {At: 3 * s, Err: offline, Offline: true}, {At: 9 * s, Err: offline, Offline: true}},
			cut: cut},
		{name: "the connection's failure does not end a silence", reads: []pipeline.StreamRead{{At: s, Err: timeout}, {At: 2 * s, Err: offline, Offline: true}, {At: 3 * s, Err: timeout}},
			quiet: "no answer from its leader for 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut, quiet := pipeline.WatchReads(tc.reads)
			check := func(what, got, want string) {
				if want == "" && got != "" || !strings.Contains(got, want) {
					t.Errorf("%s: got %q, want %q", what, got, want)
				}
			}
			check("cut off", cut, tc.cut)
			check("not answering", quiet, tc.quiet)
		})
	}
}

// TestLeaderless: an answer about a replicated stream that names no leader is not its leader's: a cut-off leader
// that stepped down answers so, describing replicas it has stood for an election with as heard.
func TestLeaderless(t *testing.T) {
	peer := func(name string, active time.Duration) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Active: active}
	}
	for _, tc := range []struct {
		name string
		ci   *jetstream.ClusterInfo
		want bool
	}{
		{name: "not clustered", ci: nil},
		{name: "single server", ci: &jetstream.ClusterInfo{Leader: "n1"}},
		{name: "R1 in a cluster", ci: &jetstream.ClusterInfo{Name: "c", Leader: "n1"}},
		{name: "led", ci: &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", 0), peer("n3", 0)}}},
		{name: "no leader, replicas unheard", ci: &jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer("n1", 20*time.Second), peer("n2", 20*time.Second), peer("n3", 20*time.Second)}}, want: true},
		{name: "no leader, replicas heard", ci: &jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer("n1", 0), peer("n2", 0), peer("n3", 0)}}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pipeline.Leaderless(tc.ci); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
