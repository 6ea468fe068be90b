// Package jsapi holds what the packages that speak to the JetStream API by raw request share: the subject prefix a
// JetStream handle addresses.
package jsapi

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Prefix is the subject prefix of the JetStream API that o addresses: "$JS.API." unless a domain or an API prefix
// is set, always ending in a dot.
func Prefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		if strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix
		}
		return o.APIPrefix + "."
	}
	return jetstream.DefaultAPIPrefix
}
