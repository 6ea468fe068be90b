package main

import (
	"strings"
	"testing"
)

// sources check counts one source in the singular.
func TestSourcesCheckCountsOneSource(t *testing.T) {
	t.Setenv("DEDUPE_SOURCES_FILE", "")
	t.Setenv("DEDUPE_SOURCES", "sources:\n  github: {dedupe: github}\n")
	code, out, errOut := runCLI(t, "", "sources", "check")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	if first, _, _ := strings.Cut(out, "\n"); !strings.HasSuffix(first, ": 1 source") {
		t.Errorf("first line %q, want it to end in \": 1 source\"", first)
	}
}

// window get -h lists the flags get takes; --all and --yes are forget's alone.
func TestWindowHelpListsOnlyItsFlags(t *testing.T) {
	_, get, _ := runCLI(t, "", "window", "get", "-h")
	_, forget, _ := runCLI(t, "", "window", "forget", "-h")
	for _, f := range []string{"--all", "--yes"} {
		if strings.Contains(get, f) {
			t.Errorf("window get -h lists %s:\n%s", f, get)
		}
		if !strings.Contains(forget, f) {
			t.Errorf("window forget -h lacks %s:\n%s", f, forget)
		}
	}
}
