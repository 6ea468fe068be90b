package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config prints each setting with its value in force and where it came from, the server and where that came
// from, and the sources document, and never a secret.
func TestConfigCommand(t *testing.T) {
	cleanNATSEnv(t)
	t.Setenv("DEDUPE_SOURCES", "")
	t.Setenv("DEDUPE_DEFAULT_TTL", "1h")
	t.Setenv("NATS_URL", "nats://dedupe:s3cret-pass@nats.example:4222")
	file := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(file, []byte("sources:\n  orders: {dedupe: {json: data.id}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEDUPE_SOURCES_FILE", file)
	code, out, stderr := runCLI(t, "", "config", "--json")
	if code != 0 || strings.Contains(out, "s3cret-pass") {
		t.Fatalf("exit %d, %q, %q", code, out, stderr)
	}
	var rep configReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	from := map[string]configSetting{}
	for _, s := range rep.Settings {
		from[s.Name] = s
	}
	for name, want := range map[string]configSetting{
		"DEDUPE_DEFAULT_TTL":             {Name: "DEDUPE_DEFAULT_TTL", Value: "1h", From: "environment"},
		"DEDUPE_ACK_WAIT":                {Name: "DEDUPE_ACK_WAIT", Value: "30s", From: "default"},
		"DEDUPE_OUTPUT_DUPLICATE_WINDOW": {Name: "DEDUPE_OUTPUT_DUPLICATE_WINDOW", Value: "2m", From: "derived"},
	} {
		if from[name] != want {
			t.Errorf("%s: %+v, want %+v", name, from[name], want)
		}
	}
	if rep.Server != "nats://[redacted]@nats.example:4222" || rep.Origin != "url from NATS_URL" ||
		rep.Sources != "DEDUPE_SOURCES_FILE "+file+": orders" {
		t.Errorf("server %q from %q, sources %q", rep.Server, rep.Origin, rep.Sources)
	}
	code, out, _ = runCLI(t, "", "config")
	if code != 0 || !strings.Contains(out, "DEDUPE_DEFAULT_TTL") || !strings.Contains(out, "server   nats://[redacted]@nats.example:4222 (url from NATS_URL)") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}
