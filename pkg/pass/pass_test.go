package pass_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

var (
	count  = pass.NewKey[int]("test/count")
	label  = pass.NewKey[string]("test/label")
	inputs = pass.NewKey[[]string]("test/inputs")
)

func stage(name string, reads, writes []pass.AnyKey, do func(s *pass.State)) pass.Stage {
	return pass.Func{ID: name, In: reads, Out: writes, Do: func(_ context.Context, s *pass.State) error { do(s); return nil }}
}

// A stage reads only what it declared, and writes only what it declared
// writing; outside stages everything may be read.
func TestStagesTouchOnlyWhatTheyDeclare(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    pass.Stage
		panic string
	}{
		{"declared read and write", stage("ok", pass.Keys(count), pass.Keys(label), func(s *pass.State) {
			pass.Put(s, label, strings.Repeat("x", pass.Get(s, count)))
		}), ""},
		{"a write may be read back", stage("rw", nil, pass.Keys(count), func(s *pass.State) {
			pass.Update(s, count, func(n int) int { return n + 1 })
		}), ""},
		{"undeclared read", stage("sneaky", nil, nil, func(s *pass.State) { pass.Get(s, count) }), `stage sneaky: read of key "test/count"`},
		{"read is no write", stage("writer", pass.Keys(count), nil, func(s *pass.State) { pass.Put(s, count, 2) }), `stage writer: write of key "test/count"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pass.New(time.Now(), pass.With(count, 3))
			got := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						var ue *pass.UndeclaredError
						if err, ok := r.(error); ok && errors.As(err, &ue) {
							msg = ue.Error()
						}
					}
				}()
				s.Enter(tc.st)
				defer s.Leave()
				_ = tc.st.Run(context.Background(), s)
				return ""
			}()
			if !strings.Contains(got, tc.panic) || (tc.panic == "") != (got == "") {
				t.Fatalf("panic %q, want %q", got, tc.panic)
			}
			if tc.panic == "" {
				pass.Get(s, label) // outside a stage: anything
			}
		})
	}
}

// Check assembles a pass only when every read has a writer before it.
func TestCheck(t *testing.T) {
	writeCount := stage("count", nil, pass.Keys(count), nil)
	readCount := stage("label", pass.Keys(count), pass.Keys(label), nil)
	readInputs := stage("inputs", pass.Keys(inputs), nil, nil)
	for _, tc := range []struct {
		name   string
		stages []pass.Stage
		in     []pass.AnyKey
		opt    []pass.AnyKey
		err    string
	}{
		{name: "in order", stages: []pass.Stage{writeCount, readCount}},
		{name: "read before written", stages: []pass.Stage{readCount, writeCount}, err: `stage label reads "test/count", which no stage before it writes`},
		{name: "an input", stages: []pass.Stage{readInputs}, in: pass.PresetKeys(pass.With(inputs, nil))},
		{name: "an optional key", stages: []pass.Stage{readInputs}, opt: pass.Keys(inputs)},
		{name: "missing input", stages: []pass.Stage{readInputs}, err: `reads "test/inputs"`},
		{name: "a name twice", stages: []pass.Stage{writeCount, writeCount}, err: "stage count listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pass.Check(tc.stages, tc.in, tc.opt...)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Check: %v, want %q", err, tc.err)
			}
		})
	}
}

// Keys are unique in a process.
func TestKeysAreUnique(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second key named test/count was declared")
		}
	}()
	pass.NewKey[int]("test/count")
}

type structStage struct{ pass.Func }

func (s *structStage) Run(context.Context, *pass.State) error { return nil }

// The table names each stage's folder, a Func's by its function's and a
// stage type's by its Run method's.
func TestTable(t *testing.T) {
	a, b := pass.NewKey[int]("tableA"), pass.NewKey[int]("tableB")
	stages := []pass.Stage{
		pass.Func{ID: "one", Out: pass.Keys(a, b), Do: func(context.Context, *pass.State) error { return nil }},
		&structStage{pass.Func{ID: "two", Acting: true, In: pass.Keys(a)}},
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The module's path stands for its folder in a build with -trimpath
	// (make's).
	got := pass.Table(stages, root, "github.com/dra-autoscaler/dra-autoscaler/pkg")
	wantRows := []string{
		"| one | `pass` |  | – | tableA, tableB |",
		"| two | `pass` | yes | tableA | – |",
	}
	for _, row := range wantRows {
		if !strings.Contains(got, row+"\n") {
			t.Errorf("table lacks %q:\n%s", row, got)
		}
	}
}
