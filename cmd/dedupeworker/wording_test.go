package main

import (
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// What the commands print says what happened, once, and echoes what was asked.
func TestCommandWording(t *testing.T) {
	cleanNATSEnv(t)
	srv := natstest.Run(t)
	t.Setenv("DEDUPE_NATS_URL", srv.URL())
	e := newDlqEnv(t, srv.URL())

	// An empty dead-letter stream is said once.
	code, out, stderr := runCLI(t, "", "dlq", "ls")
	if code != 0 || strings.TrimSpace(out) != "DEDUPE_DLQ holds no dead letters" {
		t.Errorf("dlq ls on an empty stream: exit %d, %q, %q", code, out, stderr)
	}
	// A replay that replays nothing does not say it removed anything.
	e.deadLetter("bad-tenant", "ingest.a.b.c", 0, "bad tenant", nil, []byte(`{}`), "")
	code, out, stderr = runCLI(t, "", "dlq", "replay", "--yes")
	if code != 1 || !strings.Contains(out, "replayed none of the 1 selected dead letters of DEDUPE_DLQ: nothing was removed") ||
		strings.Contains(out, "removed them") {
		t.Errorf("dlq replay --yes of a refused letter: exit %d, %q, %q", code, out, stderr)
	}
	// forget --all names what it would remove: the source too, or every source.
	for args, want := range map[string]string{
		"--tenant acme --all":             `window forget: --all removes every claim of tenant "acme", of every source; add --yes to confirm`,
		"--tenant acme --source gh --all": `window forget: --all removes every claim of tenant "acme" and source "gh"; add --yes to confirm`,
	} {
		code, _, stderr = runCLI(t, "", append([]string{"window", "forget"}, strings.Fields(args)...)...)
		if code != 2 || strings.TrimSpace(stderr) != want {
			t.Errorf("window forget %s: exit %d, %q; want %q", args, code, stderr, want)
		}
	}
}
