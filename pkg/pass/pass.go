// Package pass is what one pass of the loop is made of: stages that each
// declare what they read and write, and the pass's state, a set of typed
// values by key in the spirit of the scheduler framework's CycleState. A
// key belongs to the package of the stage that writes it; a stage that
// reads it imports that package, so the compiler checks the value's type,
// and the pass checks, when it is assembled, that every key a stage reads
// is written by a stage before it, and, while a stage runs, that it
// touches only the keys it declared.
//
// This package imports nothing of the project: every stage, the runner
// (pkg/loop) and the wiring (pkg/autoscaler) import it.
package pass

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// AnyKey is a Key of any type, for declarations.
type AnyKey interface {
	String() string
	key() string
}

// Key names one value of a pass's state, of type T.
type Key[T any] struct{ name string }

var (
	keysMu sync.Mutex
	keys   = map[string]bool{}
)

// NewKey declares a key; its name must be unique in the process (it
// names the value in errors and in the generated stage table).
func NewKey[T any](name string) Key[T] {
	keysMu.Lock()
	defer keysMu.Unlock()
	if keys[name] {
		panic(fmt.Sprintf("pass: key %q declared twice", name))
	}
	keys[name] = true
	return Key[T]{name: name}
}

func (k Key[T]) String() string { return k.name }
func (k Key[T]) key() string    { return k.name }

// Stage is one step of a pass: a name (for logs, metrics and errors), the
// keys it reads and writes, and a Run over the pass's state. A stage
// that changes the world (the provider, the API server) says so in Acts,
// and a dry run (explain) leaves it out.
type Stage interface {
	Name() string
	Reads() []AnyKey
	Writes() []AnyKey
	Acts() bool
	Run(ctx context.Context, s *State) error
}

// Keys is a declaration list (a stage's Reads or Writes).
func Keys(ks ...AnyKey) []AnyKey { return ks }

// Func is a Stage made of its declarations and a function: most stages
// are a few lines over the parts their package holds.
type Func struct {
	ID     string
	In     []AnyKey
	Out    []AnyKey
	Acting bool
	Do     func(ctx context.Context, s *State) error
}

var _ Stage = Func{}

func (f Func) Name() string                            { return f.ID }
func (f Func) Reads() []AnyKey                         { return f.In }
func (f Func) Writes() []AnyKey                        { return f.Out }
func (f Func) Acts() bool                              { return f.Acting }
func (f Func) Run(ctx context.Context, s *State) error { return f.Do(ctx, s) }

// State is one pass's values. Outside a stage (the runner, explain,
// tests) every key may be read; inside one, only those it declared.
type State struct {
	// Started is when the pass started: every stage judges at this time.
	Started time.Time

	values map[string]any
	// running is the stage running now (nil between stages), with its
	// declared keys.
	running       string
	reads, writes map[string]bool
}

// New starts a pass's state at started, holding inputs (values the
// caller gives the pass, as if written before its first stage).
func New(started time.Time, inputs ...Preset) *State {
	s := &State{Started: started, values: map[string]any{}}
	for _, in := range inputs {
		s.values[in.key.key()] = in.value
	}
	return s
}

// Preset is a value a pass starts with (see With).
type Preset struct {
	key   AnyKey
	value any
}

// With is an input of a pass: k holds v from the start.
func With[T any](k Key[T], v T) Preset { return Preset{key: k, value: v} }

// PresetKeys are the keys inputs give, for Check.
func PresetKeys(in ...Preset) []AnyKey {
	out := make([]AnyKey, len(in))
	for i, x := range in {
		out[i] = x.key
	}
	return out
}

// Get is k's value, the zero value when nothing wrote it. Inside a stage
// that did not declare k (read or write) it panics: the pass ends with the
// error, and the stage's declarations are fixed.
func Get[T any](s *State, k Key[T]) T {
	v, _ := Lookup(s, k)
	return v
}

// Lookup is Get, and whether anything wrote k.
func Lookup[T any](s *State, k Key[T]) (T, bool) {
	s.check(k, false)
	v, ok := s.values[k.name]
	if !ok {
		var zero T
		return zero, false
	}
	return v.(T), true
}

// Put sets k's value. Inside a stage that did not declare writing k it
// panics.
func Put[T any](s *State, k Key[T], v T) {
	s.check(k, true)
	s.values[k.name] = v
}

// Update sets k's value to f of its current one (zero if unset).
func Update[T any](s *State, k Key[T], f func(T) T) {
	Put(s, k, f(Get(s, k)))
}

func (s *State) check(k AnyKey, write bool) {
	if s.running == "" {
		return
	}
	name := k.key()
	if s.writes[name] || !write && s.reads[name] {
		return
	}
	what := "read"
	if write {
		what = "write"
	}
	panic(&UndeclaredError{Stage: s.running, Key: name, Op: what})
}

// UndeclaredError is a stage touching a key it did not declare.
type UndeclaredError struct {
	Stage, Key, Op string
}

func (e *UndeclaredError) Error() string {
	return fmt.Sprintf("stage %s: %s of key %q, which it does not declare", e.Stage, e.Op, e.Key)
}

// Enter marks st as the running stage (the runner calls it around Run).
func (s *State) Enter(st Stage) {
	s.running = st.Name()
	s.reads, s.writes = set(st.Reads()), set(st.Writes())
}

// Leave marks that no stage runs.
func (s *State) Leave() { s.running, s.reads, s.writes = "", nil, nil }

func set(ks []AnyKey) map[string]bool {
	m := make(map[string]bool, len(ks))
	for _, k := range ks {
		m[k.key()] = true
	}
	return m
}

// Check tells whether the stages, in order and given the inputs, form a
// pass: unique names, and every key a stage reads written by an input or
// a stage before it. optional keys may be read without a writer (a
// feature that is off leaves its key unset: readers see the zero value).
func Check(stages []Stage, inputs []AnyKey, optional ...AnyKey) error {
	written := set(inputs)
	for _, k := range optional {
		written[k.key()] = true
	}
	names := map[string]bool{}
	var errs []string
	for _, st := range stages {
		if names[st.Name()] {
			errs = append(errs, fmt.Sprintf("stage %s listed twice", st.Name()))
		}
		names[st.Name()] = true
		for _, k := range st.Reads() {
			if !written[k.key()] {
				errs = append(errs, fmt.Sprintf("stage %s reads %q, which no stage before it writes", st.Name(), k.key()))
			}
		}
		for _, k := range st.Writes() {
			written[k.key()] = true
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("the pass's stages do not fit: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Error is a stage's failure with the kind errors_total counts it as
// (cloudProviderError, snapshotError, simulationError, ...).
type Error struct {
	Kind string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Failed wraps err (nil: nil) as a stage failure of kind.
func Failed(kind string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Err: err}
}
