package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
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

// workerRetries reads the worker's /metrics at base (http://host:port) and returns its non-zero retryCounters,
// one "name{labels}=value" each, sorted; "" when all are zero.
func workerRetries(base string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	return parseRetries(resp.Body)
}

// parseRetries picks the non-zero samples of retryCounters out of a Prometheus text exposition.
func parseRetries(r io.Reader) (string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, name := range retryCounters {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil || v == 0 {
				break
			}
			out = append(out, strings.TrimPrefix(line[:i], "dedupeworker_")+"="+line[i+1:])
			break
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	sort.Strings(out)
	return strings.Join(out, " "), nil
}
