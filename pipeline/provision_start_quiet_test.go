package pipeline_test

import (
	"strings"
	"testing"
)

// A worker that creates its streams at its start does not report them as deleted under it: the status poll runs
// from Run's first moment, beside the provisioning, and a stream not created yet is not a stream deleted. Before,
// the first poll on a fresh server logged "stream DEDUPED: missing (deleted under the running worker)" and asked for
// the streams to be created a second time.
func TestFreshStartReportsNothingMissing(t *testing.T) {
	for range 3 {
		e := newEnv(t)
		cfg := e.config(memWindow())
		cfg.Provision = true
		e.start(cfg)
		if l := e.log.String(); strings.Contains(l, "deleted under the running worker") {
			t.Fatalf("a fresh start reported a stream deleted under the running worker:\n%s", l)
		}
	}
}
