package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// The receiver's alerts and dashboard are files of their own (the receiver is deployed apart from the worker):
// they use only what receiver.NewMetrics exports, with the labels it has, and the dashboard shows every one.
const (
	ingestAlertsFile    = "prometheus/ingest-alerts.yaml"
	ingestDashboardFile = "grafana/dedupeworker-ingest.json"
)

// receiverMetrics lists what receiver.NewMetrics exports, as workerMetrics does for the worker.
func receiverMetrics(t *testing.T) exported {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	_ = receiver.NewMetrics(rec)
	ex := exported{labels: map[string][]string{}, types: map[string]string{}}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }() // ends when Describe has sent every descriptor
		for d := range ch {
			s := d.String()
			n := descName.FindStringSubmatch(s)
			if n == nil {
				t.Fatalf("cannot read a metric name from %s", s)
			}
			var labels []string
			if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, name := range strings.Split(l[1], ",") {
					labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")"))
				}
			}
			ex.labels[n[1]] = labels
		}
	}
	fams, err := rec.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		ex.types[f.GetName()] = f.GetType().String()
	}
	if len(ex.labels) < 5 {
		t.Fatalf("receiver.NewMetrics described %d metrics: the test would prove little", len(ex.labels))
	}
	return ex
}

func loadIngestAlerts(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(ingestAlertsFile)
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
		t.Fatalf("%s: %v", ingestAlertsFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// Every alert's metrics exist with the labels it uses; each alert is complete and has its runbook; the situations
// the receiver must be watched for are covered.
func TestIngestAlertRules(t *testing.T) {
	ex := receiverMetrics(t)
	ops := anchors(t, operationsMD)
	opsText, err := os.ReadFile(operationsMD)
	if err != nil {
		t.Fatal(err)
	}
	rules := loadIngestAlerts(t)
	used := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
			t.Errorf("rule %+v: an alert needs a name and an expr", r)
			continue
		}
		checkExpr(t, ex, "alert "+r.Alert, r.Expr, used)
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		if _, anchor, ok := strings.Cut(r.Annotations["runbook"], "OPERATIONS.md#"); !ok || !ops[anchor] {
			t.Errorf("alert %s: runbook %q is not a heading of OPERATIONS.md", r.Alert, r.Annotations["runbook"])
		}
		if !strings.Contains(string(opsText), "### "+r.Alert+"\n") {
			t.Errorf("OPERATIONS.md has no runbook section \"### %s\"", r.Alert)
		}
	}
	for metric, what := range map[string]string{
		"dedupeworker_ingest_verify_failures_total":    "verification failures by source",
		"dedupeworker_ingest_requests_total":           "the 5xx rate",
		"dedupeworker_ingest_publish_duration_seconds": "publish latency",
		"dedupeworker_ingest_in_flight":                "in flight near the limit",
		"dedupeworker_ingest_in_flight_limit":          "in flight near the limit",
		"dedupeworker_ingest_buffered_bytes_limit":     "the body buffer near its limit",
	} {
		if !used[metric] {
			t.Errorf("no alert watches %s (%s)", metric, what)
		}
	}
}

// The dashboard is valid, uses the data source variable, asks only for exported metrics, and shows every one.
func TestIngestDashboard(t *testing.T) {
	data, err := os.ReadFile(ingestDashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", ingestDashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard needs a title and a uid")
	}
	var generic any
	_ = json.Unmarshal(data, &generic)
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		queries++
		if len(p.Targets) == 0 || !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: no query, or a datasource other than ${datasource}", p.Title)
		}
	}
	if queries < 6 {
		t.Errorf("%d query panels, want at least 6", queries)
	}
	ex := receiverMetrics(t)
	qs := map[string]string{}
	dashboardQueries(generic, "dashboard", qs)
	used := map[string]bool{}
	for where, q := range qs {
		checkExpr(t, ex, where, q, used)
	}
	for name := range ex.labels {
		if !used[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}
