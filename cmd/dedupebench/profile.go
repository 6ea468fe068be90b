package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// pprofAddrEnv tells the pprof-enabled worker build where to serve net/http/pprof.
const pprofAddrEnv = "DEDUPEBENCH_PPROF_ADDR"

// pprofOverlay is added to package main of ./cmd/dedupeworker with `go build -overlay` (the source tree is not
// touched) when the worker serves no /debug/pprof of its own: with DEDUPEBENCH_PPROF_ADDR set it serves
// net/http/pprof there (on http.DefaultServeMux, which the worker does not use) and samples mutex contention and
// blocking, so that the bench can fetch CPU, allocation, mutex and block profiles of the real worker.
const pprofOverlay = `package main

import (
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
)

func init() {
	addr := os.Getenv("` + pprofAddrEnv + `")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return
	}
	runtime.SetMutexProfileFraction(100)
	runtime.SetBlockProfileRate(100000)
	go http.Serve(ln, nil)
}
`

// buildProfiledWorker builds ./cmd/dedupeworker plus pprofOverlay into out.
func buildProfiledWorker(ctx context.Context, root, tmp, out string) error {
	src := filepath.Join(tmp, "zz_dedupebench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofOverlay), 0o600); err != nil {
		return err
	}
	overlay, err := json.Marshal(map[string]map[string]string{
		"Replace": {filepath.Join(root, "cmd", "dedupeworker", "zz_dedupebench_pprof.go"): src},
	})
	if err != nil {
		return err
	}
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		return err
	}
	if err := goBuild(ctx, root, out, "-overlay="+ov, "./cmd/dedupeworker"); err != nil {
		return fmt.Errorf("pprof-enabled worker: %w", err)
	}
	return nil
}
