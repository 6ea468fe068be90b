package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// scCommand is one window command run against the full window, with its time and what it printed.
type scCommand struct {
	args     []string
	seconds  float64
	exit     int
	lines    int // JSON lines on stdout (window ls: claims, plus the next line)
	problem  string
	stdout   string
	stderrLn string // the last line of stderr
	// before is the same command run with -before-bin (an older build), for the read-only commands.
	before *scCommand
}

// windowCommand runs "dedupeworker window <args>" as an operator would and checks what it printed; read-only
// commands run again with -before-bin when it is set.
func (r *scRun) windowCommand(ctx context.Context, check func(c *scCommand) string, args ...string) *scCommand {
	c := r.runWindowBin(ctx, r.o.workerBin, check, args)
	if r.o.beforeBin != "" && args[0] != "forget" {
		c.before = r.runWindowBin(ctx, r.o.beforeBin, check, args)
	}
	r.report.commands = append(r.report.commands, c)
	for _, run := range []*scCommand{c, c.before} {
		if run == nil {
			continue
		}
		mark, who := "ok", ""
		if run.problem != "" {
			mark = "FAILED: " + run.problem
		}
		if run == c.before {
			who = " (before)"
		}
		r.logf("window %s%s: %.2fs, %d line(s): %s", strings.Join(args, " "), who, run.seconds, run.lines, mark)
	}
	return c
}

func (r *scRun) runWindowBin(ctx context.Context, bin string, check func(c *scCommand) string, args []string) *scCommand {
	c := &scCommand{args: args}
	cmd := exec.CommandContext(ctx, bin, append([]string{"window"}, args...)...)
	cmd.Env = scEnv(r.srv.url(), r.o.shards)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	c.seconds = time.Since(t0).Seconds()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		c.exit = ee.ExitCode()
	} else if err != nil {
		c.exit, c.problem = -1, err.Error()
	}
	c.stdout = out.String()
	for l := range strings.SplitSeq(strings.TrimSpace(c.stdout), "\n") {
		if strings.HasPrefix(l, "{") {
			c.lines++
		}
	}
	if lines := strings.Split(strings.TrimSpace(errb.String()), "\n"); len(lines) > 0 {
		c.stderrLn = lines[len(lines)-1]
	}
	if c.problem == "" {
		if c.exit != 0 {
			c.problem = fmt.Sprintf("exit %d: %s", c.exit, c.stderrLn)
		} else {
			c.problem = check(c)
		}
	}
	return c
}

// scNextOf is the revision of a window ls page's last line {"next": REV}, "" when there is none.
func scNextOf(c *scCommand) string {
	lines := strings.Split(strings.TrimSpace(c.stdout), "\n")
	var v struct {
		Next json.Number `json:"next"`
	}
	if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &v) != nil {
		return ""
	}
	return v.Next.String()
}

// scListed checks a window ls answer: claims lines of claims, and a next line or not.
func scListed(claims int, more bool) func(c *scCommand) string {
	return func(c *scCommand) string {
		want := claims
		if more {
			want++
		}
		switch {
		case c.lines != want:
			return fmt.Sprintf("%d lines, want %d claims%s", c.lines, claims, map[bool]string{true: " and a next line"}[more])
		case more != (scNextOf(c) != ""):
			return fmt.Sprintf("next line present: %v, want %v", !more, more)
		}
		return ""
	}
}

func scContains(s string) func(c *scCommand) string {
	return func(c *scCommand) string {
		if !strings.Contains(c.stdout, s) {
			return fmt.Sprintf("printed %q, want %s", strings.TrimSpace(c.stdout), s)
		}
		return ""
	}
}

// windowCommands runs the operator's commands against the full window: status, get, ls of a dense scope (one
// tenant in eight) and of a sparse one (ten keys behind every other), paging, and forget.
func (r *scRun) windowCommands(ctx context.Context) error {
	r.windowCommand(ctx, func(c *scCommand) string {
		var v struct {
			Buckets []struct{ Keys uint64 } `json:"buckets"`
		}
		if err := json.Unmarshal([]byte(c.stdout), &v); err != nil {
			return err.Error()
		}
		var keys uint64
		for _, b := range v.Buckets {
			keys += b.Keys
		}
		if keys != uint64(r.w.events) {
			return fmt.Sprintf("%d keys, want %d", keys, r.w.events)
		}
		return ""
	}, "status", "--json")
	oldest := 0 // acme's first event, from the first chunk
	for r.w.tenant(oldest) != "acme" {
		oldest++
	}
	r.windowCommand(ctx, scContains(`"claimed":true`), "get", "--tenant", "acme", "--source", scSource, "--key", scDeliveryID(oldest))
	r.windowCommand(ctx, scContains(`"claimed":false`), "get", "--tenant", "acme", "--source", scSource, "--key", "never-claimed")
	page := r.windowCommand(ctx, scListed(10, true), "ls", "--tenant", "acme", "--limit", "10")
	if next := scNextOf(page); next != "" {
		r.windowCommand(ctx, scListed(10, true), "ls", "--tenant", "acme", "--limit", "10", "--from", next)
	}
	r.windowCommand(ctx, scListed(10_000, true), "ls", "--tenant", "acme", "--source", scSource, "--limit", "10000")
	r.windowCommand(ctx, scListed(scSparseKeys, false), "ls", "--tenant", scSparseTenant)
	page = r.windowCommand(ctx, scListed(3, true), "ls", "--tenant", scSparseTenant, "--source", scSource, "--limit", "3")
	if next := scNextOf(page); next != "" {
		r.windowCommand(ctx, scListed(scSparseKeys-3, false), "ls", "--tenant", scSparseTenant, "--source", scSource, "--from", next)
	}
	spread := len(r.w.chunks)
	r.windowCommand(ctx, scListed(spread, false), "ls", "--tenant", scSpreadTenant)
	if spread > 2 {
		page = r.windowCommand(ctx, scListed(2, true), "ls", "--tenant", scSpreadTenant, "--limit", "2")
		if next := scNextOf(page); next != "" {
			r.windowCommand(ctx, scListed(spread-2, false), "ls", "--tenant", scSpreadTenant, "--from", next)
		}
	}
	r.windowCommand(ctx, scListed(0, false), "ls", "--tenant", "nobody")
	r.windowCommand(ctx, scContains(`"forgotten":1`), "forget", "--tenant", scSparseTenant, "--source", scSource, "--key", scDeliveryID(r.w.sparse))
	r.windowCommand(ctx, scContains(fmt.Sprintf(`"forgotten":%d`, scSparseKeys-1)), "forget", "--tenant", scSparseTenant, "--all", "--yes")
	r.windowCommand(ctx, scListed(0, false), "ls", "--tenant", scSparseTenant)
	return ctx.Err()
}

// scRestart is one restart of nats-server under the full window.
type scRestart struct {
	signal           string
	stop, recovery   time.Duration // signal to exit; start to /healthz ok (every stream recovered)
	ready            time.Duration // signal to the worker's /readyz ok again
	reasons          []string      // what /readyz said meanwhile
	heap, rss        int64         // the server's, right after recovery
	probeSeconds     float64       // retries of the oldest events plus as many new ones, drained
	outputs, want    int
	problem          string
	readyErr, stopEr error
}

// restart stops nats-server with sig, starts it on the same store, and checks the window still holds the oldest
// keys: retries of the oldest events (probe of them, a different slice each restart) must all be collapsed
// while as many new events are published.
func (r *scRun) restart(ctx context.Context, sig syscall.Signal, round int) error {
	rs := &scRestart{signal: sig.String()}
	r.report.restarts = append(r.report.restarts, rs)
	r.logf("restart: %s to nats-server", sig)
	t0 := time.Now()
	watched := make(chan readyWatch, 1)
	watchErr := make(chan error, 1)
	go func() {
		rw, err := r.worker.waitReady(ctx, t0, 15*time.Minute, true)
		watched <- rw
		watchErr <- err
	}()
	var err error
	rs.stop, rs.stopEr = r.srv.stop(sig, 2*time.Minute)
	if rs.recovery, err = r.srv.start(ctx, 15*time.Minute); err != nil {
		return err
	}
	rw := <-watched
	rs.ready, rs.reasons, rs.readyErr = rw.took, rw.reasons, <-watchErr
	if rs.readyErr != nil {
		rs.problem = rs.readyErr.Error()
		return rs.readyErr
	}
	if rs.heap, err = r.srv.heap(); err != nil {
		return fmt.Errorf("scale: server heap: %w", err)
	}
	rs.rss = r.srv.rss()

	var probe []int32
	for e := round * r.o.probe; e < min((round+1)*r.o.probe, r.w.sparse); e++ {
		probe = append(probe, int32(e)) // retries of the oldest events: all collapsed
	}
	for e := range r.o.probe {
		probe = append(probe, int32(r.w.events+round*r.o.probe+e)) // new events: all published
	}
	t1 := time.Now()
	last, err := publishEvents(ctx, r.js, r.w, probe)
	if err != nil {
		return err
	}
	if err := r.waitDrained(ctx, last, r.o.chunkTimeout); err != nil {
		return fmt.Errorf("scale: after the %s restart: %w", sig, err)
	}
	rs.probeSeconds = time.Since(t1).Seconds()
	r.expected += r.o.probe
	rs.want = r.expected
	rs.outputs, _ = streamMsgs(ctx, r.js, outputStream)
	if rs.outputs != rs.want {
		rs.problem = fmt.Sprintf("%d outputs, want %d: a retry of an old key was published again or a new event lost", rs.outputs, rs.want)
	}
	r.logf("restart %s: stopped in %s, recovered in %s, worker ready %s after the signal; probe: outputs %d of %d; readiness said: %s",
		sig, rs.stop.Round(time.Millisecond), rs.recovery.Round(time.Millisecond), rs.ready.Round(time.Millisecond),
		rs.outputs, rs.want, strings.Join(rs.reasons, " | "))
	return nil
}

// forgetDense ends the run with a tenant-wide forget of one of the eight dense tenants (an eighth of the
// window): one subject-filtered purge, then a listing that must come back empty.
func (r *scRun) forgetDense(ctx context.Context) error {
	const tenant = "wonka"
	want := 0
	for e := range r.w.events + 2*r.o.probe {
		if r.w.tenant(e) == tenant {
			want++
		}
	}
	r.windowCommand(ctx, scContains(fmt.Sprintf(`"forgotten":%d`, want)), "forget", "--tenant", tenant, "--all", "--yes")
	r.windowCommand(ctx, scListed(0, false), "ls", "--tenant", tenant)
	return ctx.Err()
}
