// Command dedupebench measures dedupeworker against a floor (the least work the design needs per envelope), a
// naive one-at-a-time client and JetStream's own duplicate window, on a reproducible webhook workload, with the
// nats-server and each worker in their own processes so that their CPU and memory are measured apart.
//
//	go run . -quick        # in bench/: under a minute
//	go run .               # in bench/: 200,000 envelopes, RSS check at 50k and 200k
//
// See BENCHMARKS.md for what each figure means.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "dedupebench:", err)
		}
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
