package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dedupeworker/dedupeworker/internal/promreg"
)

func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "dedupeworker_test_total", Help: "A counter."}
	first := promreg.Register(reg, prometheus.NewCounter(opts))
	second := promreg.Register(reg, prometheus.NewCounter(opts))
	if first != second {
		t.Fatal("a second collector of the same description was not given the first")
	}
	loose := prometheus.NewCounter(opts)
	if got := promreg.Register(nil, loose); got != loose {
		t.Fatal("a nil registry must return the collector itself")
	}

	defer func() {
		if recover() == nil {
			t.Fatal("a collector of another type under a registered name must panic")
		}
	}()
	promreg.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "dedupeworker_test_total", Help: "A gauge."}))
}
