package main

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// retryCounters are the worker's counters of work done twice or handed back: a drain that pays for them looks
// slower per envelope for a reason other than CPU per step, so the bench names them (a note) when they are not zero.
var retryCounters = []string{
	"dedupeworker_naks_total",
	"dedupeworker_stale_deliveries_total",
	"dedupeworker_ack_failures_total",
	"dedupeworker_window_errors_total",
	"dedupeworker_possible_duplicates_total",
}

// getMetrics fetches the /metrics text a worker serves at base (http://host:port).
func getMetrics(hc *http.Client, base string) (string, error) {
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// workerRetries reads the worker's /metrics at base and returns its non-zero retryCounters (parseRetries).
func workerRetries(base string) (string, error) {
	text, err := getMetrics(&http.Client{Timeout: 2 * time.Second}, base)
	if err != nil {
		return "", err
	}
	return parseRetries(text)
}

// parseRetries picks the non-zero samples of retryCounters out of a Prometheus text exposition, one
// "name{labels}=value" each (without the dedupeworker_ prefix), sorted; "" when all are zero.
func parseRetries(text string) (string, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return "", err
	}
	var out []string
	for _, name := range retryCounters {
		mf := families[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetUntyped().GetValue() // a text without # TYPE reads as untyped
			if v == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			s := strings.TrimPrefix(name, "dedupeworker_")
			if len(labels) > 0 {
				s += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, s+"="+strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " "), nil
}
