// Package promreg registers Prometheus collectors so that two constructors given one registry share their series:
// the worker and the receiver each build their metrics from a Registerer, and a process (or a test) that builds
// them twice on one registry gets the collectors registered first instead of an error.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it, or the collector of the same description already registered
// there; with a nil reg it returns c unregistered. A different collector under the same name is a programming
// error, and panics as prometheus.MustRegister does.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
