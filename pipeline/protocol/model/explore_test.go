package model

import (
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what an exploration found.
type Report struct {
	Config     Config
	States     int                   // distinct states visited
	Terminal   int                   // of which end states (nothing enabled)
	Violations int                   // transitions (or end states) that broke an invariant
	Rules      map[string]int        // violations by invariant (the Rule* constants)
	Firsts     map[string]*Violation // the first violation of each invariant, and the first excused break of each rule
	// Excused counts, by rule, the transitions that broke a rule the deployment's settings excuse (Excused): not
	// violations, and the exploration goes on past them.
	Excused   map[string]int
	First     *Violation
	Elapsed   time.Duration
	Truncated bool // MaxStates reached
}

func (r Report) String() string {
	s := fmt.Sprintf("%s: %d states (%d end states), %d violations in %s", r.Config, r.States, r.Terminal, r.Violations,
		r.Elapsed.Round(time.Millisecond))
	if r.Truncated {
		s += " (truncated)"
	}
	for _, k := range slices.Sorted(maps.Keys(r.Rules)) {
		s += fmt.Sprintf("\n  %6d × %s", r.Rules[k], k)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Excused)) {
		s += fmt.Sprintf("\n  %6d × %s, not a violation", r.Excused[k], k)
	}
	return s
}

// Options of an exploration besides its bound.
type Options struct {
	StopAtFirst bool // end at the first violation (mutation tests)
	MaxStates   int  // 0: no limit
	// Rule, when set, is the only invariant that counts as a violation (a mutation's); the others are ignored.
	Rule string
	// Baseline, when set, is the decider a mutation was made from: a violation counts only if the baseline does
	// not break the same invariant on the same interleaving, so that what is found is the mutation's own.
	Baseline Decider
	// BaselineConfig, when set, is the world the baseline runs in (a mutation of the world, such as NoFence, is
	// checked against the world without it).
	BaselineConfig *Config
}

// Explore runs every interleaving of the world within c, driving d, depth first, skipping states already visited.
// After each step it checks that no event was published twice while its claim lives (unless marked as a
// possible duplicate of the same envelope) and that no envelope was acked without an outcome; in each end state,
// that the event is not lost. The first violation comes with the steps that led to it. A break of a rule the
// deployment's settings excuse (Excused) is counted apart, and the search goes on past it.
func Explore(c Config, d Decider, o Options) Report {
	start := time.Now()
	x := &explorer{c: c, d: d, o: o, seen: make(map[uint64]struct{}, 1<<16),
		seed: maphash.MakeSeed()}
	x.w = &world{c: &x.c, d: d}
	x.dfs(Initial(c))
	return Report{Config: c, States: len(x.seen), Terminal: x.terminal, Violations: x.violations, Rules: x.rules, Firsts: x.firsts, First: x.first,
		Excused: x.excused, Elapsed: time.Since(start), Truncated: x.truncated}
}

type explorer struct {
	c          Config
	d          Decider
	o          Options
	w          *world
	seen       map[uint64]struct{}
	seed       maphash.Seed
	path       []Step
	terminal   int
	violations int
	rules      map[string]int
	excused    map[string]int
	firsts     map[string]*Violation
	first      *Violation
	truncated  bool
	done       bool
}

func (x *explorer) dfs(s State) {
	s.canon()
	id := x.id(s)
	if x.c.Replicas == 2 {
		// Replicas are interchangeable: a state and its mirror are one.
		id = min(id, x.id(s.mirror()))
	}
	if _, ok := x.seen[id]; ok {
		return
	}
	if x.o.MaxStates > 0 && len(x.seen) >= x.o.MaxStates {
		x.truncated = true
		return
	}
	x.seen[id] = struct{}{}
	steps := s.steps(&x.c, x.d, make([]Step, 0, 24))
	if len(steps) == 0 {
		x.terminal++
		if rule := s.lost(&x.c); rule != "" {
			x.violate(rule)
		}
		return
	}
	for _, st := range steps {
		if x.done {
			return
		}
		next := s
		x.path = append(x.path, st)
		switch rule := x.w.apply(&next, st); {
		case rule == "":
			x.dfs(next)
		case Excused(rule):
			x.excuse(rule)
			x.dfs(next)
		default:
			x.violate(rule)
		}
		x.path = x.path[:len(x.path)-1]
	}
}

func (x *explorer) violate(rule string) {
	if x.o.Rule != "" && !strings.HasPrefix(rule, x.o.Rule) {
		return
	}
	bc := x.c
	if x.o.BaselineConfig != nil {
		bc = *x.o.BaselineConfig
	}
	if x.o.Baseline != nil && breaks(bc, x.o.Baseline, x.path, rule) {
		return
	}
	x.violations++
	if x.rules == nil {
		x.rules = map[string]int{}
	}
	if x.firsts == nil {
		x.firsts = map[string]*Violation{}
	}
	name, _, _ := strings.Cut(rule, ":")
	x.rules[name]++
	if x.firsts[name] == nil {
		x.firsts[name] = &Violation{Rule: rule, Trace: Replay(x.c, x.d, x.path)}
	}
	if x.first == nil {
		x.first = x.firsts[name]
	}
	if x.o.StopAtFirst {
		x.done = true
	}
}

// excuse counts a break of a rule the deployment's settings excuse, keeping the first trace of each.
func (x *explorer) excuse(rule string) {
	if x.excused == nil {
		x.excused = map[string]int{}
	}
	if x.firsts == nil {
		x.firsts = map[string]*Violation{}
	}
	name, _, _ := strings.Cut(rule, ":")
	x.excused[name]++
	if x.firsts[name] == nil {
		x.firsts[name] = &Violation{Rule: rule, Trace: Replay(x.c, x.d, x.path)}
	}
}

// Initial is the world before the first step: every copy stored in the input stream, nothing delivered.
func Initial(c Config) State {
	var s State
	for e := 0; e < c.Envelopes; e++ {
		s.E[e].Present = true
	}
	return s
}

// Replay makes steps from the initial state and returns a line per step: the readable trace of an interleaving.
func Replay(c Config, d Decider, steps []Step) []string {
	var lines []string
	w := &world{c: &c, d: d, log: func(l string) { lines = append(lines, l) }}
	s := Initial(c)
	for _, st := range steps {
		if rule := w.apply(&s, st); rule != "" {
			lines = append(lines, "  ⇒ "+rule)
		}
	}
	if rule := s.lost(&c); rule != "" && len(s.steps(&c, d, nil)) == 0 {
		lines = append(lines, "  ⇒ end state: "+rule)
	}
	return lines
}

// id is a state's 64-bit hash: the visited set keeps hashes, not states. Two states may share one (about 2e-5
// odds at 25 million states), and the second would be skipped.
func (x *explorer) id(s State) uint64 { return maphash.Comparable(x.seed, s) }

// mirror is s with replicas 0 and 1 swapped.
func (s State) mirror() State {
	s.R[0], s.R[1] = s.R[1], s.R[0]
	for i := range s.H {
		if s.H[i].On {
			s.H[i].Rep ^= 1
		}
	}
	return s
}

// canon renumbers the revisions in s by their order: only their equality and order matter (a write takes the
// next revision, above every one in use), so states that differ only in how many writes came before are one.
func (s *State) canon() {
	var revs [1 + len(s.H)]uint8
	n := 0
	add := func(r uint8) {
		if r != 0 && !slices.Contains(revs[:n], r) {
			revs[n] = r
			n++
		}
	}
	add(s.Key.Rev)
	for i := range s.H {
		add(s.H[i].Rev)
	}
	slices.Sort(revs[:n])
	rank := func(r uint8) uint8 {
		if r == 0 {
			return 0
		}
		return uint8(slices.Index(revs[:n], r) + 1)
	}
	s.Key.Rev = rank(s.Key.Rev)
	for i := range s.H {
		s.H[i].Rev = rank(s.H[i].Rev)
	}
	s.RevCtr = uint8(n)
}

// breaks reports whether d, driven along steps (as far as each is enabled for it), breaks the invariant named
// like rule's.
func breaks(c Config, d Decider, steps []Step, rule string) bool {
	name, _, _ := strings.Cut(rule, ":")
	w := &world{c: &c, d: d}
	s := Initial(c)
	for _, st := range steps {
		if !slices.Contains(s.steps(&c, d, nil), st) {
			return false
		}
		if r := w.apply(&s, st); r != "" && !Excused(r) {
			n, _, _ := strings.Cut(r, ":")
			return n == name
		}
	}
	if r := s.lost(&c); r != "" && len(s.steps(&c, d, nil)) == 0 {
		n, _, _ := strings.Cut(r, ":")
		return n == name
	}
	return false
}
