package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// dlq rm removes one dead letter or a selection, after a dry run that changes nothing; it never removes what was
// not selected, and refuses to remove everything without --all.
func TestDlqRemove(t *testing.T) {
	cleanNATSEnv(t)
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())
	e.deadLetter("output-reject", "ingest.acme.stripe", 1, "too large", nil, []byte(`{}`), "")  // 1
	e.deadLetter("bad-tenant", "ingest.a.b.c", 2, "bad tenant", nil, []byte(`{}`), "")          // 2
	e.deadLetter("output-reject", "ingest.acme.github", 3, "too large", nil, []byte(`{}`), "")  // 3
	e.deadLetter("output-reject", "ingest.other.github", 4, "too large", nil, []byte(`{}`), "") // 4

	code, _, stderr := runCLI(t, "", "dlq", "rm", "--yes")
	if code != 2 || !strings.Contains(stderr, "dlq rm: say what to remove") {
		t.Errorf("dlq rm --yes without a selection: exit %d, %q", code, stderr)
	}
	code, out, stderr := runCLI(t, "", "dlq", "rm", "--reason", "output-reject", "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "dry run: would remove 2 selected dead letters from DEDUPE_DLQ. Nothing was changed") ||
		rowSeqsOf(t, out) != "1,3" {
		t.Errorf("dry run: exit %d, %q, %q", code, out, stderr)
	}
	if n := e.state("DEDUPE_DLQ").Msgs; n != 4 {
		t.Fatalf("the dry run changed the stream: %d messages", n)
	}
	code, out, stderr = runCLI(t, "", "dlq", "rm", "2", "--yes")
	if code != 0 || !strings.Contains(out, "removed 1 of the 1 selected dead letters from DEDUPE_DLQ") || rowSeqsOf(t, out) != "2" {
		t.Errorf("dlq rm 2 --yes: exit %d, %q, %q", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "dlq", "rm", "--reason", "output-reject", "--tenant", "acme", "--yes")
	if code != 0 || !strings.Contains(out, "removed 2 of the 2 selected dead letters") {
		t.Errorf("dlq rm selection --yes: exit %d, %q, %q", code, out, stderr)
	}
	if st := e.state("DEDUPE_DLQ"); st.Msgs != 1 || st.FirstSeq != 4 {
		t.Errorf("left %d messages from %d, want only seq 4", st.Msgs, st.FirstSeq)
	}
}

// rowSeqsOf is the SEQ column of a dlq table, comma separated.
func rowSeqsOf(t *testing.T, out string) string {
	t.Helper()
	return strings.Join(rowSeqs(tableRows(t, out)), ",")
}

// The failures an error of dlq rm or dlq replay lists: the first 20, then how many more, so that a long run's error
// stays one line and still counts what it does not show.
func TestDlqListed(t *testing.T) {
	seqs := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "seq " + strconv.Itoa(i+1)
		}
		return s
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "seq 1"},
		{3, "seq 1, seq 2, seq 3"},
		{20, strings.Join(seqs(20), ", ")},
		{21, strings.Join(seqs(20), ", ") + " and 1 more"},
		{125, strings.Join(seqs(20), ", ") + " and 105 more"},
	} {
		if got := dlqListed(seqs(tc.n)); got != tc.want {
			t.Errorf("%d failures: got %q, want %q", tc.n, got, tc.want)
		}
	}
}
