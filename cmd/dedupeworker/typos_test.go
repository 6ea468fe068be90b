package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// A DEDUPE_* variable no setting reads is a typo until shown otherwise: every command that reads the settings
// warns, naming the nearest setting.
func TestUnknownSettingsWarn(t *testing.T) {
	cleanNATSEnv(t)
	t.Setenv("DEDUPE_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	t.Setenv("DEDUPE_LOG_FORMAT", "text")
	t.Setenv("DEDUPE_DEFALT_TTL", "1h")
	t.Setenv("DEDUPE_REPLICA", "3")
	for _, args := range [][]string{{"window", "status"}, {"dlq", "ls"}} {
		_, _, stderr := runCLI(t, "", args...)
		for _, want := range []string{"unknown setting DEDUPE_DEFALT_TTL is ignored: did you mean DEDUPE_DEFAULT_TTL?",
			"unknown setting DEDUPE_REPLICA is ignored: did you mean DEDUPE_REPLICAS?"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: no %q in\n%s", args, want, stderr)
			}
		}
	}
}

// A sources file that declares no source deploys every preset, as no file does: the worker says so at WARN, where
// no file at all is an INFO.
func TestEmptySourcesFileWarns(t *testing.T) {
	for _, tc := range []struct {
		name, file, level string
	}{{"empty file", "", "WARN"}, {"no sources", "sources: {}\n", "WARN"}, {"no file", "-", "INFO"}} {
		t.Run(tc.name, func(t *testing.T) {
			cleanNATSEnv(t)
			embeddedEnv(t)
			t.Setenv("DEDUPE_LOG_FORMAT", "json")
			if tc.file != "-" {
				path := filepath.Join(t.TempDir(), "sources.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("DEDUPE_SOURCES_FILE", path)
			}
			logs, stop := startWorker(t)
			var line map[string]any
			natstest.Eventually(t, 30*time.Second, func() error {
				if !strings.Contains(logs.String(), "preset") {
					return fmt.Errorf("no line about the presets yet:\n%s", logs.String())
				}
				for _, l := range jsonLines(t, logs.String()) {
					if strings.Contains(fmt.Sprint(l["msg"]), "declaring one source per preset") {
						line = l
						return nil
					}
				}
				return fmt.Errorf("no line about the presets yet:\n%s", logs.String())
			})
			_ = stop()
			if line == nil || line["level"] != tc.level {
				t.Fatalf("want a %s line about the presets, got %v:\n%s", tc.level, line, logs.String())
			}
			if tc.level == "WARN" && !strings.Contains(fmt.Sprint(line["msg"]), "DEDUPE_SOURCES_FILE") {
				t.Errorf("the warning does not name the file: %v", line)
			}
		})
	}
}
