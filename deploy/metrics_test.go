package deploy_test

// The Grafana dashboard is valid, and it and the alert rules use only metrics the worker exports.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/pipeline"
)

// ---------------------------------------------------------------------------------------------------------------
// Metrics: the dashboard and the alerts use only what the worker exports.

// recorder registers collectors into a registry and keeps them, so that every metric's descriptor can be listed,
// including vectors that have no child yet (Gather leaves those out).
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^{}]*)\}\}$`)
	descConst  = regexp.MustCompile(`constLabels: \{([^{}]*)\}`)
)

type exported struct {
	labels map[string][]string // metric name -> label names
	types  map[string]string   // metric name -> type (COUNTER, HISTOGRAM, ...); gathered families only
}

func workerMetrics(t *testing.T) exported {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	_ = pipeline.NewMetrics(rec)
	if len(rec.collectors) == 0 {
		t.Fatal("pipeline.NewMetrics registered no collector")
	}
	ex := exported{labels: map[string][]string{}, types: map[string]string{}}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			n := descName.FindStringSubmatch(s)
			if n == nil {
				t.Fatalf("cannot read a metric name from %s", s)
			}
			var labels []string
			if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, name := range strings.Split(l[1], ",") {
					name = strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")
					labels = append(labels, name)
				}
			}
			if l := descConst.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, pair := range strings.Split(l[1], ",") {
					if k, _, ok := strings.Cut(pair, "="); ok {
						labels = append(labels, k)
					}
				}
			}
			ex.labels[n[1]] = labels
		}
	}
	fams, err := rec.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		ex.types[f.GetName()] = f.GetType().String()
		if _, ok := ex.labels[f.GetName()]; !ok {
			ex.labels[f.GetName()] = nil
		}
	}
	return ex
}

var (
	metricRef   = regexp.MustCompile(`dedupeworker_[a-z_]+`)
	selectorRef = regexp.MustCompile(`(dedupeworker_[a-z_]+)\{([^}]*)\}`)
	matcherRef  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingRef = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	// Labels Prometheus attaches to every scraped series (or histogram buckets carry).
	targetLabels = []string{"le", "instance", "job", "pod", "namespace", "container", "service", "endpoint", "node"}
)

// baseName strips the suffixes Prometheus adds to histogram and summary series.
func baseName(s string) (name, suffix string) {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(s, suf) {
			return strings.TrimSuffix(s, suf), suf
		}
	}
	return s, ""
}

// checkExpr checks that every dedupeworker_ metric an expression names is exported, with the right type for a
// histogram suffix, and that the labels it matches on or groups by exist.
func checkExpr(t *testing.T, ex exported, where, expr string, used map[string]bool) {
	t.Helper()
	names := metricRef.FindAllString(expr, -1)
	allowed := map[string]bool{}
	for _, l := range targetLabels {
		allowed[l] = true
	}
	for _, raw := range names {
		name, suffix := baseName(raw)
		if _, ok := ex.labels[raw]; ok && suffix != "" { // a counter that really ends in _count, say
			name, suffix = raw, ""
		}
		labels, ok := ex.labels[name]
		if !ok {
			t.Errorf("%s: %s is not a metric the worker exports (expr %q)", where, raw, expr)
			continue
		}
		used[name] = true
		for _, l := range labels {
			allowed[l] = true
		}
		if suffix != "" {
			typ, gathered := ex.types[name]
			switch {
			case !gathered: // a vector with no child yet: its type is not visible
			case suffix == "_bucket" && typ != "HISTOGRAM":
				t.Errorf("%s: %s: %s is a %s, not a histogram", where, raw, name, typ)
			case typ != "HISTOGRAM" && typ != "SUMMARY":
				t.Errorf("%s: %s uses %s, but %s is a %s", where, raw, suffix, name, typ)
			}
		}
	}
	for _, sel := range selectorRef.FindAllStringSubmatch(expr, -1) {
		name, _ := baseName(sel[1])
		labels, ok := ex.labels[name]
		if !ok {
			continue
		}
		for _, mt := range matcherRef.FindAllStringSubmatch(sel[2], -1) {
			if !slices.Contains(labels, mt[1]) && !slices.Contains(targetLabels, mt[1]) {
				t.Errorf("%s: %s has no label %q (labels: %v)", where, name, mt[1], labels)
			}
		}
	}
	for _, g := range groupingRef.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !allowed[l] {
				t.Errorf("%s: groups by %q, which none of its metrics has (expr %q)", where, l, expr)
			}
		}
	}
	if err := balanced(expr); err != nil {
		t.Errorf("%s: %v in %q", where, err, expr)
	}
}

func balanced(s string) error {
	var stack []rune
	inStr := rune(0)
	for _, r := range s {
		switch {
		case inStr != 0:
			if r == inStr {
				inStr = 0
			}
		case r == '"' || r == '\'' || r == '`':
			inStr = r
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case r == ')' || r == '}' || r == ']':
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unbalanced %q", r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inStr != 0 {
		return errors.New("unclosed bracket or string")
	}
	return nil
}

// dashboardQueries walks the dashboard JSON and returns every "expr", and every string "query"/"definition".
func dashboardQueries(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := path + "." + k
			if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				if strings.Contains(s, "dedupeworker_") || k == "expr" {
					out[p] = s
				}
				continue
			}
			dashboardQueries(c, p, out)
		}
	case []any:
		for i, c := range x {
			dashboardQueries(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func loadDashboard(t *testing.T) (dashboard, any) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	var generic any
	_ = json.Unmarshal(data, &generic)
	return d, generic
}

func TestDashboardIsValid(t *testing.T) {
	d, _ := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard needs a title and a uid")
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		t.Fatal("dashboard has no Prometheus datasource template variable")
	}
	var all []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	ids := map[int]bool{}
	queries := 0
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		queries++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
		}
		if ds := string(p.Datasource); !strings.Contains(ds, "${"+dsVar+"}") && !strings.Contains(ds, "${DS_PROMETHEUS}") {
			t.Errorf("panel %q datasource %s does not use the ${%s} variable", p.Title, ds, dsVar)
		}
	}
	if queries < 10 {
		t.Errorf("dashboard has %d query panels, want at least 10", queries)
	}
}

func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	ex := workerMetrics(t)
	for _, want := range []string{"dedupeworker_envelopes_total", "dedupeworker_claim_duration_seconds", "dedupeworker_ready"} {
		if _, ok := ex.labels[want]; !ok {
			t.Fatalf("pipeline.NewMetrics does not export %s; exported: %v", want, keysOf(ex.labels))
		}
	}
	used := map[string]bool{}

	_, generic := loadDashboard(t)
	qs := map[string]string{}
	dashboardQueries(generic, "dashboard", qs)
	if len(qs) == 0 {
		t.Fatal("no queries found in the dashboard")
	}
	for where, q := range qs {
		checkExpr(t, ex, where, q, used)
	}
	dashUsed := copyUsed(used)

	for _, r := range loadAlerts(t) {
		checkExpr(t, ex, "alert "+r.Alert, r.Expr, used)
	}
	// Every metric the worker exports is on the dashboard.
	for name := range ex.labels {
		if strings.HasPrefix(name, "dedupeworker_") && !dashUsed[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func copyUsed(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
