package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

// runCLI calls run as main would and returns the exit status with both outputs.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code = exitCode(err, &errb)
	return code, out.String(), errb.String()
}

func TestKeyCommand(t *testing.T) {
	cases := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		stdout   string
		stderrIs string
	}{
		{"github header", "{}", []string{"key", "--dedupe", "github", "-H", "X-GitHub-Delivery: d1", "--tenant", "acme", "--source", "gh"}, 0,
			`{"key":"d1","idempotency_key":"acme:gh:d1"}`, ""},
		{"json path", `{"data":{"id":42}}`, []string{"key", "--dedupe", `{"json":"data.id"}`}, 0,
			`{"key":"42","idempotency_key":"default:default:42"}`, ""},
		{"missing", "{}", []string{"key", "--dedupe", "github"}, 0, `{"key":null,"reason":"missing"}`, ""},
		{"not json", "nope", []string{"key", "--dedupe", "stripe"}, 0, `{"key":null,"reason":"not-json"}`, ""},
		{"too large", `{"id":"x"}`, []string{"key", "--dedupe", "stripe", "--max-json-bytes", "3"}, 0, `{"key":null,"reason":"too-large"}`, ""},
		{"payload yaml spec", `{"a":1,"ts":2}`, []string{"key", "--dedupe", "{payload: {except: [.ts]}}"}, 0, `"key":"`, ""},
		{"bad spec", "", []string{"key", "--dedupe", "gitlab"}, 2, "", "dedupe: "},
		{"no spec", "", []string{"key"}, 2, "", "key: --dedupe is required"},
		{"bad tenant", "", []string{"key", "--dedupe", "github", "--tenant", "a.b"}, 2, "", "key: --tenant"},
		{"bad header", "", []string{"key", "--dedupe", "github", "-H", "nocolon"}, 2, "", "key: -H"},
		{"bad flag", "", []string{"key", "--nope"}, 2, "", "key: flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if tc.stdout != "" && !strings.Contains(strings.ReplaceAll(out, " ", ""), tc.stdout) {
				t.Fatalf("stdout %q, want %q", out, tc.stdout)
			}
			if tc.stderrIs != "" && !strings.Contains(errOut, tc.stderrIs) {
				t.Fatalf("stderr %q, want it to contain %q", errOut, tc.stderrIs)
			}
			if tc.code == 0 && !json.Valid([]byte(out)) {
				t.Fatalf("stdout is not one JSON object: %q", out)
			}
		})
	}
}

func TestKeyCommandBodyFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(f, []byte(`{"id":"evt_1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "", "key", "--dedupe", "stripe", "--body", f)
	if code != 0 || !strings.Contains(out, `"evt_1"`) {
		t.Fatalf("%d %q %q", code, out, errOut)
	}
}

func TestHashCommand(t *testing.T) {
	const payload = `{"user_id":42,"template":"welcome"}`
	const digest = "1f98104cc5a072ae84731379f5888c48c1886f7d58681e806cc9cca4d601f765"
	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"digest", payload, []string{"hash"}, 0, digest + "\n", ""},
		{"typed", payload, []string{"hash", "--type", "send_email"}, 0, "send_email:" + digest + "\n", ""},
		{"canonical", payload, []string{"hash", "--canonical"}, 0, `{"template":"welcome","user_id":42,}` + "\n", ""},
		{"only", `{"to":"test@test.com","subject":"Example"}`, []string{"hash", "--only", ".to"}, 0,
			"b5c4c35eeacf8bbf2034b0ed8b0e2f9ac3e7da66b79b543e9c6c124d90c371a3\n", ""},
		{"bad path", payload, []string{"hash", "--only", "to"}, 2, "", "hash: "},
		{"only and except", payload, []string{"hash", "--only", ".a", "--except", ".b"}, 2, "", "hash: "},
		{"invalid json", `{"a":`, []string{"hash"}, 1, "", "hash: "},
		{"two files", "", []string{"hash", "a", "b"}, 2, "", "hash: at most one FILE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if tc.stdout != "" && out != tc.stdout {
				t.Fatalf("stdout %q, want %q", out, tc.stdout)
			}
			if tc.stderr != "" && !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("stderr %q, want it to contain %q", errOut, tc.stderr)
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("stderr should be one line: %q", errOut)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := runCLI(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, want := range []string{"key", "hash", "window", "sources check", "DEDUPE_NATS_URL", "DEDUPE_DEFAULT_TTL",
			"DEDUPE_INGEST_BODY_TIMEOUT", "DEDUPE_INGEST_MAX_BUFFERED_BYTES",
			"Settings (environment; the worker reads all but DEDUPE_INGEST_*, which only ingest reads):"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	// What the heading of the settings says.
	run, ingest := config.RoleVariables(config.RoleRun), config.RoleVariables(config.RoleIngest)
	for _, v := range config.Variables() {
		ingestOnly := strings.HasPrefix(v, "DEDUPE_INGEST_")
		if slices.Contains(run, v) == ingestOnly || ingestOnly && !slices.Contains(ingest, v) {
			t.Errorf("%s: read by the worker %v, by ingest %v; the help says DEDUPE_INGEST_* only by ingest, the others by the worker",
				v, slices.Contains(run, v), slices.Contains(ingest, v))
		}
	}
	for _, cmd := range []string{"key", "hash", "run"} {
		code, out, errOut := runCLI(t, "", cmd, "-h")
		if code != 0 || !strings.Contains(out, "Usage: dedupeworker") || errOut != "" {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", cmd, code, out, errOut)
		}
	}
	code, _, errOut := runCLI(t, "", "frobnicate")
	if code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
}

func TestBadSettingStopsWorker(t *testing.T) {
	t.Setenv("DEDUPE_DEFAULT_TTL", "500ms")
	// An empty command (dedupeworker "$CMD" with CMD unset) is run, and its errors say so as run's do.
	for _, args := range [][]string{{"run"}, {""}, nil} {
		code, _, errOut := runCLI(t, "", args...)
		if code != 2 || !strings.Contains(errOut, "run: DEDUPE_DEFAULT_TTL") {
			t.Fatalf("%q: %d %q", args, code, errOut)
		}
	}
}

// Every variable compose.yaml sets must be one the worker reads: a typo there would be silently ignored.
func TestComposeVariablesAreRead(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	known := config.Variables()
	n := 0
	for name, svc := range doc.Services {
		for v := range svc.Environment {
			n++
			if !slices.Contains(known, v) {
				t.Errorf("compose.yaml service %s sets %s, which the worker does not read", name, v)
			}
		}
	}
	if n == 0 {
		t.Fatal("compose.yaml sets no variables: the test would prove nothing")
	}
}
