package deploy_test

import (
	"path/filepath"
	"slices"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// alertUnitTests are promtool's unit test files of the rule files (make deploy-check runs them).
var alertUnitTests = map[string]string{
	alertsFile:       "prometheus/tests/alerts.test.yaml",
	ingestAlertsFile: "prometheus/tests/ingest-alerts.test.yaml",
}

// TestEveryAlertHasUnitTests checks, without promtool, that the unit tests keep up with the rule files: each test
// file loads its rule file, and every alert has a case where it fires and one where it does not.
func TestEveryAlertHasUnitTests(t *testing.T) {
	for rulesFile, rules := range map[string][]rule{alertsFile: loadAlerts(t), ingestAlertsFile: loadIngestAlerts(t)} {
		testFile := alertUnitTests[rulesFile]
		var f struct {
			RuleFiles []string `yaml:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(readFile(t, testFile), &f); err != nil {
			t.Fatalf("%s: %v", testFile, err)
		}
		rel, err := filepath.Rel(filepath.Dir(testFile), rulesFile)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.RuleFiles, []string{rel}) {
			t.Errorf("%s: rule_files %v, want [%s]", testFile, f.RuleFiles, rel)
		}
		fires, quiet := map[string]bool{}, map[string]bool{}
		for _, g := range f.Tests {
			for _, c := range g.AlertRuleTest {
				if len(c.ExpAlerts) > 0 {
					fires[c.Alertname] = true
				} else {
					quiet[c.Alertname] = true
				}
			}
		}
		for _, r := range rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alert %s needs a case where it fires and one where it does not (%s)", testFile, r.Alert, rulesFile)
			}
		}
	}
}
