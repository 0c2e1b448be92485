package shortcut

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
)

// Checker checks shortcuts' answers against the plain framework's. In
// verify mode every decision is checked and the plain answer computed in
// full; otherwise (the shadow check, in production) a few decisions per
// pass, each at a bounded cost. A nil Checker checks nothing.
type Checker struct {
	// Set is the shortcuts in use; with DisableOnMismatch, a shortcut
	// found wrong is turned off there for the rest of the process.
	Set *Set
	// Verify checks every decision.
	Verify bool
	// FitSamples and EstimateSamples bound the checks of one pass:
	// fit-existing decisions, and estimates (each over EstimatePods
	// pods at most).
	FitSamples, EstimateSamples int
	// EstimatePods bounds the pods a sampled estimate is recomputed for
	// (the first ones of the estimate's order); 0: DefaultEstimatePods.
	EstimatePods int
	// DisableOnMismatch turns a shortcut off once it was found wrong.
	DisableOnMismatch bool
	// Report is told of every mismatch (metrics, log, event); nil: none.
	Report func(Mismatch)
	// OnCheck is told of every check made, by what was checked
	// ("fitExisting", "estimate", "carry"); nil: none.
	OnCheck func(kind string)

	mu               sync.Mutex
	fitLeft, estLeft int
	fitSeen          int
	mismatches       []Mismatch
	rnd              *rand.Rand
}

// DefaultEstimatePods is how many pods a sampled estimate is recomputed
// for: the plain estimate asks the framework about every pod on every
// node, quadratic in this.
const DefaultEstimatePods = 16

// Mismatch is a shortcut's answer that differs from the plain
// framework's.
type Mismatch struct {
	// Shortcut is the one whose answer was wrong, "" when the check could
	// not tell which.
	Shortcut Name
	// Kind is what was checked: "fitExisting", "estimate" or "carry".
	Kind string
	// Pod (namespace/name) and Class are the pod decided for (fit
	// existing, or the first pod that differs in an estimate); Node the
	// node the shortcut chose or skipped; Group the node group.
	Pod, Class, Node, Group string
	// Got is the shortcut's answer, Want the plain one.
	Got, Want string
}

func (m Mismatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s shortcut %q", m.Kind, m.Shortcut)
	for _, kv := range [][2]string{{"pod", m.Pod}, {"class", m.Class}, {"node", m.Node}, {"group", m.Group}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s %s", kv[0], kv[1])
		}
	}
	fmt.Fprintf(&b, ": shortcut says %s, the plain framework %s", m.Got, m.Want)
	return b.String()
}

// StartPass starts a pass's budget.
func (c *Checker) StartPass() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fitLeft, c.estLeft, c.fitSeen = c.FitSamples, c.EstimateSamples, 0
	c.mismatches = nil
	if c.rnd == nil {
		c.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
}

// Fits returns, for a fit-existing run over n pods, which of its
// decisions (by index) to check: all in verify mode, else up to the
// pass's budget left, chosen at random. nil: none.
func (c *Checker) Fits(n int) func(i int) bool {
	if c == nil || n == 0 {
		return nil
	}
	if c.Verify {
		return func(int) bool { return true }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := min(c.fitLeft, n)
	if k <= 0 {
		return nil
	}
	c.fitLeft -= k
	picked := map[int]bool{}
	for _, i := range c.random().Perm(n)[:k] {
		picked[i] = true
	}
	return func(i int) bool { return picked[i] }
}

// Estimate reports whether to check an estimate (the pass's budget
// allows one more), and over how many pods at most (0: all, in verify
// mode).
func (c *Checker) Estimate() (check bool, pods int) {
	if c == nil {
		return false, 0
	}
	if c.Verify {
		return true, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.estLeft <= 0 {
		return false, 0
	}
	c.estLeft--
	if c.EstimatePods > 0 {
		return true, c.EstimatePods
	}
	return true, DefaultEstimatePods
}

// Pick returns a random index below n (n > 0), for the choice of which
// group or nodes to check.
func (c *Checker) Pick(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.random().IntN(n)
}

func (c *Checker) random() *rand.Rand {
	if c.rnd == nil {
		c.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c.rnd
}

// Checked records that a check of kind was made.
func (c *Checker) Checked(kind string) {
	if c != nil && c.OnCheck != nil {
		c.OnCheck(kind)
	}
}

// Found records a mismatch: reported, kept for Err, and, with
// DisableOnMismatch, its shortcut turned off.
func (c *Checker) Found(m Mismatch) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.mismatches = append(c.mismatches, m)
	c.mu.Unlock()
	if c.DisableOnMismatch && m.Shortcut != "" && c.Set != nil {
		c.Set.Disable(m.Shortcut)
	}
	if c.Report != nil {
		c.Report(m)
	}
}

// Err is the pass's mismatches as an error (nil: none); in verify mode
// the pass fails with it.
func (c *Checker) Err() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mismatches) == 0 {
		return nil
	}
	errs := make([]error, len(c.mismatches))
	for i, m := range c.mismatches {
		errs[i] = errors.New(m.String())
	}
	return fmt.Errorf("%d simulation shortcut mismatch(es): %w", len(errs), errors.Join(errs...))
}
