// Package attrreads finds which device attributes the DRA allocator may
// read for a cluster's claims: those the CEL selectors of device classes,
// claims and claim templates name, and those claims' constraints match on.
// An attribute nothing reads cannot change an allocation, so two nodes
// whose devices differ only in such attributes offer every claim the same.
// Real drivers publish a few of those per device (a GPU's uuid, its PCI
// bus id, a serial number): with them in the node keys that let
// fit-existing, scale-down and stranded capacity ask the framework about
// one node of many alike, no two GPU nodes of a real cluster are alike.
package attrreads

import (
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	resourceapi "k8s.io/api/resource/v1"
)

// Reads is a set of attribute names. Names are kept without their domain:
// when any domain's "uuid" is read, every domain's counts as read (a
// coarser set, never a wrong one). A Reads is not changed once made.
type Reads struct {
	all   bool
	names map[string]struct{}
	key   string
}

// All is the set of every attribute: what is read when an expression
// reads attributes by a name it computes, iterates them, or cannot be
// parsed.
var All = &Reads{all: true, key: "*"}

// Has reports whether name (a device's attribute key, "domain/name" or
// "name") may be read.
func (r *Reads) Has(name resourceapi.QualifiedName) bool {
	if r.all {
		return true
	}
	_, ok := r.names[short(string(name))]
	return ok
}

// HasAll reports whether every one of names (short names, as Names
// returns them) may be read.
func (r *Reads) HasAll(names []string) bool {
	if r.all {
		return true
	}
	for _, n := range names {
		if _, ok := r.names[n]; !ok {
			return false
		}
	}
	return true
}

// Key names the set: equal sets have equal keys.
func (r *Reads) Key() string { return r.key }

// Names are the short names of the attributes of devs, sorted, each once;
// nil when they have none.
func Names(devs []resourceapi.Device) []string {
	var out []string
	for i := range devs {
		for name := range devs[i].Attributes {
			out = append(out, short(string(name)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// short is an attribute name without its domain.
func short(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// Collector gathers what objects read into a Reads. It remembers what
// each CEL expression reads across collections (parsing one costs tens of
// microseconds; a cluster has few distinct ones). Not safe for concurrent
// use.
type Collector struct {
	exprs map[string]exprReads
	all   bool
	names map[string]struct{}
}

type exprReads struct {
	all   bool
	names []string
}

// maxExprs bounds the memo: past it, it starts again.
const maxExprs = 4096

// Reset empties the set gathered; what expressions read is kept.
func (c *Collector) Reset() {
	c.all = false
	clear(c.names)
}

// Class adds what class's selectors read.
func (c *Collector) Class(class *resourceapi.DeviceClass) {
	if class != nil {
		c.selectors(class.Spec.Selectors)
	}
}

// ClaimSpec adds what a claim (or a claim template's claim) reads: its
// requests' selectors, their alternatives', and the attributes its
// constraints match on.
func (c *Collector) ClaimSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			c.selectors(r.Exactly.Selectors)
		}
		for j := range r.FirstAvailable {
			c.selectors(r.FirstAvailable[j].Selectors)
		}
	}
	for _, con := range spec.Devices.Constraints {
		if con.MatchAttribute != nil {
			c.add(short(string(*con.MatchAttribute)))
		}
	}
}

// Covers reports whether r holds everything spec reads.
func (c *Collector) Covers(r *Reads, spec *resourceapi.ResourceClaimSpec) bool {
	if r.all {
		return true
	}
	for i := range spec.Devices.Requests {
		req := &spec.Devices.Requests[i]
		if req.Exactly != nil && !c.coversSelectors(r, req.Exactly.Selectors) {
			return false
		}
		for j := range req.FirstAvailable {
			if !c.coversSelectors(r, req.FirstAvailable[j].Selectors) {
				return false
			}
		}
	}
	for _, con := range spec.Devices.Constraints {
		if con.MatchAttribute != nil && !r.Has(resourceapi.QualifiedName(*con.MatchAttribute)) {
			return false
		}
	}
	return true
}

// CoversClass reports whether r holds everything class reads.
func (c *Collector) CoversClass(r *Reads, class *resourceapi.DeviceClass) bool {
	return r.all || class == nil || c.coversSelectors(r, class.Spec.Selectors)
}

func (c *Collector) coversSelectors(r *Reads, sels []resourceapi.DeviceSelector) bool {
	for _, s := range sels {
		if s.CEL == nil {
			continue
		}
		e := c.expr(s.CEL.Expression)
		if e.all || !r.HasAll(e.names) {
			return false
		}
	}
	return true
}

// Reads is the set gathered since the last Reset.
func (c *Collector) Reads() *Reads {
	if c.all {
		return All
	}
	names := make([]string, 0, len(c.names))
	set := make(map[string]struct{}, len(c.names))
	for n := range c.names {
		names = append(names, n)
		set[n] = struct{}{}
	}
	slices.Sort(names)
	return &Reads{names: set, key: strings.Join(names, "\x00")}
}

func (c *Collector) selectors(sels []resourceapi.DeviceSelector) {
	for _, s := range sels {
		if s.CEL == nil || c.all {
			continue
		}
		e := c.expr(s.CEL.Expression)
		if e.all {
			c.all = true
			continue
		}
		for _, n := range e.names {
			c.add(n)
		}
	}
}

func (c *Collector) add(name string) {
	if c.names == nil {
		c.names = map[string]struct{}{}
	}
	c.names[name] = struct{}{}
}

func (c *Collector) expr(src string) exprReads {
	if e, ok := c.exprs[src]; ok {
		return e
	}
	if c.exprs == nil || len(c.exprs) >= maxExprs {
		c.exprs = map[string]exprReads{}
	}
	names, all := Expression(src)
	e := exprReads{all: all, names: names}
	c.exprs[src] = e
	return e
}

// parserEnv parses DRA's CEL: its variable is "device", and optional
// field and index syntax is allowed. Parsing needs no declarations.
var parserEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(cel.OptionalTypes())
})

// Expression is what one CEL selector expression reads: the attributes
// it names as device.attributes["domain"].name (or ["name"], or the
// optional forms). Any other use of device.attributes, of one domain's
// attributes, or of device itself (iterated, passed to a function,
// indexed by a computed name) reads them all, as does an expression that
// does not parse. names are sorted, each once.
func Expression(src string) (names []string, all bool) {
	env, err := parserEnv()
	if err != nil {
		return nil, true
	}
	ast, iss := env.Parse(src)
	if iss.Err() != nil || ast == nil {
		return nil, true
	}
	var w walker
	w.walk(ast.NativeRep().Expr())
	if w.all {
		return nil, true
	}
	slices.Sort(w.names)
	return slices.Compact(w.names), false
}

type walker struct {
	all   bool
	names []string
}

func (w *walker) walk(e celast.Expr) {
	if w.all || e == nil {
		return
	}
	if name, ok := attribute(e); ok {
		w.names = append(w.names, name)
		return
	}
	if isAttributes(e) || isDevice(e) {
		// Read whole: by a computed name, iterated, or handed on (a
		// domain's attributes so used get here through their operand).
		w.all = true
		return
	}
	switch e.Kind() {
	case celast.SelectKind:
		s := e.AsSelect()
		if isDevice(s.Operand()) {
			return // device.driver, device.capacity...: not attributes
		}
		w.walk(s.Operand())
	case celast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			w.walk(call.Target())
		}
		for _, a := range call.Args() {
			w.walk(a)
		}
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.walk(el)
		}
	case celast.MapKind:
		for _, en := range e.AsMap().Entries() {
			m := en.AsMapEntry()
			w.walk(m.Key())
			w.walk(m.Value())
		}
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			w.walk(f.AsStructField().Value())
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		for _, part := range []celast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
			w.walk(part)
		}
	}
}

func isDevice(e celast.Expr) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == "device"
}

// isAttributes: device.attributes.
func isAttributes(e celast.Expr) bool {
	if e.Kind() != celast.SelectKind {
		return false
	}
	s := e.AsSelect()
	return s.FieldName() == "attributes" && isDevice(s.Operand())
}

// isDomain: one domain's attributes, device.attributes["domain"].
func isDomain(e celast.Expr) bool {
	_, ok := member(e, isAttributes)
	return ok
}

// attribute: one attribute of one domain, device.attributes["d"].name.
func attribute(e celast.Expr) (string, bool) {
	return member(e, isDomain)
}

// member matches of.name, of["name"], of.?name and of[?"name"] (and
// has(of.name)) where of is what in says, and returns name.
func member(e celast.Expr, in func(celast.Expr) bool) (string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		s := e.AsSelect()
		if in(s.Operand()) {
			return s.FieldName(), true
		}
	case celast.CallKind:
		call := e.AsCall()
		switch call.FunctionName() {
		case "_[_]", "_[?_]", "_?._":
		default:
			return "", false
		}
		args := call.Args()
		if call.IsMemberFunction() || len(args) != 2 || !in(args[0]) {
			return "", false
		}
		if name, ok := stringLiteral(args[1]); ok {
			return name, true
		}
	}
	return "", false
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	v, ok := e.AsLiteral().(types.String)
	return string(v), ok
}
