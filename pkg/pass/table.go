package pass

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
)

// Dir is the directory of the source file that holds st's code (a
// Func's Do, otherwise the stage type's Run): its package's folder, as
// the generated stage table names it. Read from the code's position, not
// its symbol, whose name is the caller's where the compiler inlined the
// stage's constructor.
func Dir(st Stage) string {
	var fn reflect.Value
	if f, ok := st.(Func); ok && f.Do != nil {
		fn = reflect.ValueOf(f.Do)
	} else if m, ok := reflect.TypeOf(st).MethodByName("Run"); ok {
		fn = m.Func
	} else {
		return ""
	}
	f := runtime.FuncForPC(fn.Pointer())
	file, _ := f.FileLine(f.Entry())
	return path.Dir(filepath.ToSlash(file))
}

// Table is the stages as a Markdown table (stage, package folder, whether
// it acts, what it reads and writes), the folders relative to the first
// of roots they are in (the module's folder, and its path for a build
// with -trimpath).
func Table(stages []Stage, roots ...string) string {
	var b strings.Builder
	b.WriteString("| stage | package | acts | reads | writes |\n| --- | --- | --- | --- | --- |\n")
	for _, st := range stages {
		acts := ""
		if st.Acts() {
			acts = "yes"
		}
		pkg := Dir(st)
		for _, r := range roots {
			if rel, ok := strings.CutPrefix(pkg, filepath.ToSlash(r)+"/"); ok {
				pkg = rel
				break
			}
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", st.Name(), pkg, acts, keyList(st.Reads()), keyList(st.Writes()))
	}
	return b.String()
}

func keyList(ks []AnyKey) string {
	if len(ks) == 0 {
		return "–"
	}
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.key()
	}
	return strings.Join(names, ", ")
}
