package deploy_test

// The Prometheus alert rules: well-formed, each linked to its runbook in OPERATIONS.md, whose links resolve.

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// ---------------------------------------------------------------------------------------------------------------
// Alerts

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q needs a name and rules", alertsFile, g.Name)
		}
		rules = append(rules, g.Rules...)
	}
	return rules
}

// anchors are the GitHub heading anchors of a Markdown document.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out[b.String()] = true
	}
	for _, m := range regexp.MustCompile(`<a (?:id|name)="([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	return out
}

func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	ops := anchors(t, operationsMD)
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if strings.TrimSpace(r.Expr) == "" {
			t.Errorf("alert %s has no expr", r.Alert)
		}
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		rb := r.Annotations["runbook"]
		_, anchor, ok := strings.Cut(rb, "OPERATIONS.md#")
		if !ok {
			t.Errorf("alert %s: runbook %q does not point into OPERATIONS.md", r.Alert, rb)
		} else if !ops[anchor] {
			t.Errorf("alert %s: runbook anchor #%s is not a heading of OPERATIONS.md", r.Alert, anchor)
		}
	}
	// The situations the alerts must cover, by the metric each one watches.
	want := map[string]string{
		"dedupeworker_consumer_pending":              "a growing lag",
		"dedupeworker_window_errors_total":           "window errors",
		`outcome="dead-letter"`:                      "dead letters",
		"dedupeworker_sources_without_dedupe":        "sources without dedupe",
		"dedupeworker_ready == 0":                    "a worker not ready",
		"(sum(dedupeworker_ready) or vector(0)) < 1": "no worker up",
	}
	for needle, what := range want {
		found := false
		for _, r := range rules {
			if strings.Contains(r.Expr, needle) {
				found = true
			}
		}
		if !found {
			t.Errorf("no alert for %s (an expr containing %q)", what, needle)
		}
	}
	for _, r := range rules {
		if strings.Contains(r.Expr, "sources_without_dedupe") && r.Labels["severity"] != "info" {
			t.Errorf("alert %s: sources without dedupe should be severity info", r.Alert)
		}
	}
}

func TestOperationsLinks(t *testing.T) {
	data, err := os.ReadFile(operationsMD)
	if err != nil {
		t.Fatal(err)
	}
	ops := anchors(t, operationsMD)
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(data), -1) {
		if !ops[m[1]] {
			t.Errorf("OPERATIONS.md links to #%s, which is not one of its headings", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`\]\((deploy/[^)#]*)\)`).FindAllStringSubmatch(string(data), -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("OPERATIONS.md links to %s: %v", m[1], err)
		}
	}
	for _, r := range loadAlerts(t) {
		if r.Alert != "" && !strings.Contains(string(data), "### "+r.Alert+"\n") {
			t.Errorf("OPERATIONS.md has no runbook section \"### %s\"", r.Alert)
		}
	}
}
