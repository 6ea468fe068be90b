package keys_test

import (
	"fmt"

	"github.com/dedupeworker/dedupeworker/keys"
)

func ExampleLoadSources() {
	srcs, err := keys.LoadSources([]byte(`
sources:
  github:   {dedupe: github}
  stripe:   {dedupe: {preset: stripe, ttl: 48h}}
  orders:   {dedupe: {json: data.order.id}}
  billing:  {dedupe: {header: X-Event-Id, ttl_seconds: 86400}}
  forms:    {dedupe: {payload: {except: [.submitted_at]}}}
  legacy:   {}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range srcs.IDs() {
		spec, _ := srcs.Lookup(id)
		fmt.Printf("%-8s %s\n", id, spec.Describe(keys.DefaultTTL))
	}
	fmt.Println("without dedupe:", srcs.WithoutDedupe)

	_, err = keys.LoadSources([]byte("sources:\n  orders: {dedupe: {json: data..id}}\n"))
	fmt.Println(err)
	// Output:
	// billing  header X-Event-Id, ttl 24h
	// forms    payload digest except [.submitted_at], ttl 72h (default)
	// github   header X-GitHub-Delivery (preset github), ttl 72h (default)
	// legacy   no dedupe
	// orders   json data.order.id, ttl 72h (default)
	// stripe   json id (preset stripe), ttl 48h
	// without dedupe: [legacy]
	// line 2: sources.orders.dedupe.json: segment 2 is empty in "data..id"
}

func ExampleExtractor_Extract() {
	var x keys.Extractor // MaxJSONBytes 0: 1 MiB

	github, _ := keys.ParseSpec([]byte("github"))
	key, reason := x.Extract(github, keys.HeaderList{{Name: "x-github-delivery", Value: "72d3162e"}}, nil)
	fmt.Printf("%q %q\n", key, reason)

	orders, _ := keys.ParseSpec([]byte(`{"json": "data.order.id", "ttl": "24h"}`))
	key, reason = x.Extract(orders, nil, []byte(`{"data":{"order":{"id":1001}}}`))
	fmt.Printf("%q %q ttl=%v\n", key, reason, orders.TTL(keys.DefaultTTL))
	fmt.Println(keys.IdempotencyHeader("acme", "orders", key))

	key, reason = x.Extract(orders, nil, []byte(`{"data":{"order":{"id":1.5}}}`))
	fmt.Printf("%q %q\n", key, reason)
	key, reason = x.Extract(orders, nil, []byte(`{"data":`))
	fmt.Printf("%q %q\n", key, reason)
	key, reason = x.Extract(keys.Spec{}, nil, nil)
	fmt.Printf("%q %q\n", key, reason)
	// Output:
	// "72d3162e" ""
	// "1001" "" ttl=24h0m0s
	// acme:orders:1001
	// "" "missing"
	// "" "not-json"
	// "" "no-dedupe"
}
