// Command namecheck fails when one exported type name is declared in two or
// more of the module's packages: an exported name has one meaning in the tree
// (docs/design/architecture.md, "Names"). It reads the module's non-test Go
// files outside hack/ and test/, skipping generated ones ("Code generated ...
// DO NOT EDIT."), and allows only the names listed in allow.txt beside it,
// each with its reason; an entry that no longer names a duplicate fails too.
// `make lint` runs it from the module root.
//
// Versions of one Kubernetes API group (apis/capacitybuffer/v1alpha1 and
// v1beta1) count as one package: their kinds are one meaning, served twice.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
)

const hint = "rename one, or add it to hack/namecheck/allow.txt with the reason"

func main() {
	root := flag.String("root", ".", "the module's root directory")
	allow := flag.String("allow", "hack/namecheck/allow.txt", "the allow-list, relative to --root")
	flag.Parse()
	os.Exit(run(os.DirFS(*root), *allow, os.Stdout, os.Stderr))
}

// run checks the module in fsys and reports to out; it returns the exit code.
func run(fsys fs.FS, allowPath string, out, errOut io.Writer) int {
	allowed, err := readAllow(fsys, allowPath)
	if err != nil {
		fmt.Fprintf(errOut, "namecheck: %v\n", err)
		return 2
	}
	dups, stale, err := Check(fsys, allowed)
	if err != nil {
		fmt.Fprintf(errOut, "namecheck: %v\n", err)
		return 2
	}
	for _, d := range dups {
		fmt.Fprintf(out, "%s: %s\n", d.Name, strings.Join(d.Packages, " "))
	}
	if len(dups) > 0 {
		fmt.Fprintf(out, "%d exported type names are declared in more than one package: %s\n", len(dups), hint)
	}
	for _, name := range stale {
		fmt.Fprintf(out, "%s: on %s but declared in fewer than two packages: remove the entry\n", name, allowPath)
	}
	if len(dups) > 0 || len(stale) > 0 {
		return 1
	}
	return 0
}

// A Duplicate is an exported type name and the import paths of the packages
// declaring it, sorted.
type Duplicate struct {
	Name     string
	Packages []string
}

// Check returns the exported type names that the module rooted at fsys
// declares in more than one package, less the allowed ones, sorted by name,
// and the allowed names that are not declared in more than one package
// (stale entries), sorted.
func Check(fsys fs.FS, allowed map[string]bool) (dups []Duplicate, stale []string, err error) {
	module, err := modulePath(fsys)
	if err != nil {
		return nil, nil, err
	}
	decls, err := typeNames(fsys)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]map[string]bool{} // name -> package key -> declared
	where := map[string][]string{}         // name -> import paths
	for dir, names := range decls {
		key := packageKey(dir)
		for name := range names {
			if byName[name] == nil {
				byName[name] = map[string]bool{}
			}
			byName[name][key] = true
			where[name] = append(where[name], importPath(module, dir))
		}
	}
	for name, keys := range byName {
		if len(keys) < 2 {
			continue
		}
		if allowed[name] {
			continue
		}
		pkgs := where[name]
		sort.Strings(pkgs)
		dups = append(dups, Duplicate{Name: name, Packages: pkgs})
	}
	for name := range allowed {
		if len(byName[name]) < 2 {
			stale = append(stale, name)
		}
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].Name < dups[j].Name })
	sort.Strings(stale)
	return dups, stale, nil
}

// typeNames returns, per directory (slash-separated, relative to the module
// root; "." for the root), the exported type names its checked files declare
// at package level.
func typeNames(fsys fs.FS) (map[string]map[string]bool, error) {
	decls := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDir(fsys, p) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		dir := path.Dir(p)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				name := spec.(*ast.TypeSpec).Name
				if !name.IsExported() {
					continue
				}
				if decls[dir] == nil {
					decls[dir] = map[string]bool{}
				}
				decls[dir][name.Name] = true
			}
		}
		return nil
	})
	return decls, err
}

// skipDir reports whether the walk leaves the directory p out: hack/ and
// test/ at the root, what the go command ignores (testdata, vendor, names
// starting with "." or "_") and nested modules.
func skipDir(fsys fs.FS, p string) bool {
	base := path.Base(p)
	switch {
	case p == "hack" || p == "test":
		return true
	case base == "testdata" || base == "vendor" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_"):
		return true
	}
	_, err := fs.Stat(fsys, path.Join(p, "go.mod"))
	return err == nil
}

var apiVersion = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// packageKey is what counts as one package: the directory, or for a
// Kubernetes API version (…/v1alpha1, …/v1) its group's directory, so that
// one kind served in two versions is one meaning.
func packageKey(dir string) string {
	if apiVersion.MatchString(path.Base(dir)) {
		return path.Dir(dir) + "/<version>"
	}
	return dir
}

func importPath(module, dir string) string {
	if dir == "." {
		return module
	}
	return module + "/" + dir
}

func modulePath(fsys fs.FS) (string, error) {
	src, err := fs.ReadFile(fsys, "go.mod")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", errors.New("go.mod: no module line")
}

// readAllow reads the allow-list: one exported type name a line, each with
// its reason after "#"; blank lines and lines that are only a comment are
// skipped.
func readAllow(fsys fs.FS, p string) (map[string]bool, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "#")
		name = strings.TrimSpace(name)
		switch {
		case strings.TrimSpace(reason) == "":
			return nil, fmt.Errorf("%s:%d: %s has no reason (name # reason)", p, n, name)
		case !token.IsIdentifier(name) || !token.IsExported(name):
			return nil, fmt.Errorf("%s:%d: %q is not an exported name", p, n, name)
		case allowed[name]:
			return nil, fmt.Errorf("%s:%d: %s is listed twice", p, n, name)
		}
		allowed[name] = true
	}
	return allowed, sc.Err()
}
