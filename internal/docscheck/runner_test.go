package docscheck_test

// The machinery that runs a walkthrough as a reader would: one shell for the steps (so BODY=... in one step is seen
// by the next), and a process group per terminal, stopped with SIGTERM as Ctrl-C would.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// stepTimeout bounds one step; a step of the README takes well under a second, so this is a hang, not a margin.
const stepTimeout = 60 * time.Second

// shell is one bash reading the steps from a pipe, its stdout and stderr merged, as in a terminal.
type shell struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	n     int
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("docscheck: pipe for the shell: %v", err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("docscheck: stdin of the shell: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("docscheck: starting bash: %v", err)
	}
	pw.Close() // the shell holds the write end now: EOF on pr once it exits
	ctx, cancel := context.WithCancel(context.Background())
	s := &shell{cmd: cmd, in: in, lines: make(chan string)}
	done := make(chan struct{})
	go func() { // owned by the shell: ends at the pipe's EOF or when the test stops reading
		defer close(done)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				select {
				case s.lines <- strings.TrimSuffix(line, "\n"):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // whatever a step left running in its group
		_ = cmd.Wait()
		cancel()
		<-done
		pr.Close()
	})
	return s
}

// run runs one step with stdin from /dev/null (a command must not read the next steps) and returns what it printed
// and its exit status.
func (s *shell) run(command string) (string, int, error) {
	s.n++
	marker := fmt.Sprintf("@@docs-check step %d@@", s.n)
	script := fmt.Sprintf("{\n%s\n} </dev/null\nprintf '\\n%s %%d\\n' $?\n", command, marker)
	if _, err := io.WriteString(s.in, script); err != nil {
		return "", 0, fmt.Errorf("writing the step to the shell: %w", err)
	}
	var out []string
	timer := time.NewTimer(stepTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return strings.Join(out, "\n"), 0, errors.New("the shell exited")
			}
			if rest, found := strings.CutPrefix(line, marker+" "); found {
				code, _ := strconv.Atoi(rest)
				if n := len(out); n > 0 && out[n-1] == "" { // the newline printf put before the marker
					out = out[:n-1]
				}
				return strings.Join(out, "\n"), code, nil
			}
			out = append(out, line)
		case <-timer.C:
			return strings.Join(out, "\n"), 0, fmt.Errorf("no end after %s", stepTimeout)
		}
	}
}

// terminal is a long-running command of a terminals block.
type terminal struct {
	cmd  *exec.Cmd
	out  *natstest.Buffer
	done chan struct{}
	err  error
}

func startTerminal(t *testing.T, dir string, env []string, command string) *terminal {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", command)
	out := &natstest.Buffer{}
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("docscheck: starting %q: %v", command, err)
	}
	p := &terminal{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { // owned by the terminal: reaps the process
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM to the terminal's process group, as Ctrl-C would, and waits for it to exit.
func (p *terminal) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second): // above the worker's default shutdown timeout
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Errorf("docscheck: %q did not stop on SIGTERM within 45s:\n%s", p.cmd.Args[len(p.cmd.Args)-1], p.out)
	}
}

func (p *terminal) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
