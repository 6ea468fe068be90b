package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// workerBin is the dedupeworker binary built once for this test binary (empty under -short).
var workerBin string

// Knobs (environment):
//
//	DEDUPE_CHAOS=1       longer variants of scenarios 1–5 (make chaos)
//	DEDUPE_SOAK=1        the soak (make soak); DEDUPE_SOAK_N envelopes (default 1,000,000)
//	DEDUPE_WORKER_RACE=1 build the worker with -race
//	DEDUPE_SEED=n        seed of the generators (default: defaultSeed, logged; make chaos and make soak draw one)
var (
	chaos         = os.Getenv("DEDUPE_CHAOS") == "1"
	soak          = os.Getenv("DEDUPE_SOAK") == "1"
	seed, seedSrc = seedFromEnv(os.Getenv("DEDUPE_SEED"))
)

// defaultSeed is the generators' seed when DEDUPE_SEED is not set: a constant, so that `make test` (CI) feeds every
// run the same inputs and a failure reproduces. The long runs (make chaos, make soak) draw a random DEDUPE_SEED
// themselves and print it, to keep exploring other inputs.
const defaultSeed int64 = 424242

// seedFromEnv parses DEDUPE_SEED; an unparsable value is reported by TestMain rather than silently replaced.
func seedFromEnv(v string) (int64, string) {
	if v == "" {
		return defaultSeed, "default"
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return defaultSeed, "invalid"
	}
	return s, "DEDUPE_SEED"
}

func TestMain(m *testing.M) {
	flag.Parse()
	if seedSrc == "invalid" {
		fmt.Fprintf(os.Stderr, "integration: DEDUPE_SEED=%q is not an integer\n", os.Getenv("DEDUPE_SEED"))
		os.Exit(2)
	}
	if testing.Short() {
		fmt.Println("integration: fault suite skipped under -short (it starts real nats-servers and worker processes)")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "dedupeworker-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		workerBin = filepath.Join(dir, "dedupeworker")
		args := []string{"build", "-o", workerBin}
		if os.Getenv("DEDUPE_WORKER_RACE") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/dedupeworker/dedupeworker/cmd/dedupeworker")
		start := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: go %v: %v\n", args, err)
			return 1
		}
		fmt.Printf("integration: built worker in %s (seed %d, %s; DEDUPE_SEED=%d reproduces the inputs)\n",
			time.Since(start).Round(time.Millisecond), seed, seedSrc, seed)
		return m.Run()
	}()
	os.Exit(code)
}

// needWorker skips a scenario under -short.
func needWorker(t *testing.T) {
	t.Helper()
	if testing.Short() || workerBin == "" {
		t.Skip("integration: skipped under -short (real nats-servers and worker processes)")
	}
}

// scale picks the figure of the normal run or of DEDUPE_CHAOS=1.
func scale[T any](normal, chaotic T) T {
	if chaos {
		return chaotic
	}
	return normal
}
