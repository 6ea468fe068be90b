package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

// referenceDoc is the user's reference: every setting the worker reads and every metric it exports must be in it.
var referenceDoc = filepath.Join("..", "..", "docs", "reference.md")

func TestReferenceDocumentsSettingsAndMetrics(t *testing.T) {
	raw, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for _, v := range config.Variables() {
		if !strings.Contains(readme, "`"+v+"`") {
			t.Errorf("docs/reference.md does not document %s", v)
		}
	}
	reg := prometheus.NewRegistry()
	pipeline.NewMetrics(reg)
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	n := 0
	for d := range descs {
		s := d.String()
		start := strings.Index(s, `fqName: "`) + len(`fqName: "`)
		name := s[start : start+strings.Index(s[start:], `"`)]
		n++
		if !strings.Contains(readme, "`"+name+"`") {
			t.Errorf("docs/reference.md does not document metric %s", name)
		}
	}
	if n == 0 {
		t.Fatal("no metrics described: the test would prove nothing")
	}
}

// Every metric the worker exports leads an operator to an entry of OPERATIONS.md: its "Find the runbook" table
// names each one beside the runbook or page to read.
func TestOperationsKeysEveryMetricToItsEntry(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n## Find the runbook\n")
	if !ok {
		t.Fatal(`OPERATIONS.md has no "## Find the runbook" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	reg := prometheus.NewRegistry()
	pipeline.NewMetrics(reg)
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	n := 0
	for d := range descs {
		s := d.String()
		start := strings.Index(s, `fqName: "`) + len(`fqName: "`)
		name := s[start : start+strings.Index(s[start:], `"`)]
		n++
		if !strings.Contains(table, "`"+name) {
			t.Errorf(`OPERATIONS.md, "Find the runbook": metric %s leads nowhere`, name)
		}
	}
	if n == 0 {
		t.Fatal("no metrics described: the test would prove nothing")
	}
}
