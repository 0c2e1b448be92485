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
	"maps"
	"slices"
	"strconv"
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
	// left are the names claims read that the set was made without
	// (Collector.Reads); partial is set when there are any, or a claim
	// reads every attribute: some claim is not covered.
	left    map[string]struct{}
	partial bool
	key     string
}

// Partial reports whether some claim the set was made of reads what it
// does not hold (Covers is false for it): without, every claim is
// covered.
func (r *Reads) Partial() bool { return r.partial }

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

// HasAll reports whether every one of names (short names) may be read.
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

// Identities are the attributes of slices (by short name) that tell
// devices apart: a value of its own on nine devices in ten or more that
// have it, on at least two nodes (a GPU's uuid, a serial, a bus id; not
// an index, which repeats on every node). An attribute of one node's
// devices only cannot be told from an index, and is none.
func Identities(slices []*resourceapi.ResourceSlice) map[string]bool {
	type count struct {
		devices int
		values  map[string]struct{}
		nodes   map[string]struct{}
	}
	counts := map[string]*count{}
	for _, sl := range slices {
		if sl == nil || sl.Spec.NodeName == nil {
			continue
		}
		for i := range sl.Spec.Devices {
			for key, a := range sl.Spec.Devices[i].Attributes {
				n := short(string(key))
				c := counts[n]
				if c == nil {
					c = &count{values: map[string]struct{}{}, nodes: map[string]struct{}{}}
					counts[n] = c
				}
				c.devices++
				c.values[ValueString(a)] = struct{}{}
				c.nodes[*sl.Spec.NodeName] = struct{}{}
			}
		}
	}
	out := map[string]bool{}
	for n, c := range counts {
		if len(c.nodes) >= 2 && len(c.values)*10 >= c.devices*9 {
			out[n] = true
		}
	}
	return out
}

// Short is an attribute name without its domain, as a Reads keeps it.
func Short[N ~string](name N) string { return short(string(name)) }

// ValueString is a's value as a string, its kind first: equal strings,
// equal values.
func ValueString(a resourceapi.DeviceAttribute) string {
	switch {
	case a.IntValue != nil:
		return "i" + strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return "b" + strconv.FormatBool(*a.BoolValue)
	case a.StringValue != nil:
		return "s" + *a.StringValue
	case a.VersionValue != nil:
		return "v" + *a.VersionValue
	}
	return ""
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
	// classes is what device classes read (applied to every request of
	// theirs), claims what claims and claim templates read.
	classes, claims gathered
}

type gathered struct {
	all   bool
	names map[string]struct{}
}

type exprReads struct {
	all   bool
	names []string
}

// maxExprs bounds the memo: past it, it starts again.
const maxExprs = 4096

// Reset empties the sets gathered; what expressions read is kept.
func (c *Collector) Reset() {
	c.classes.all, c.claims.all = false, false
	clear(c.classes.names)
	clear(c.claims.names)
}

// Class adds what class's selectors read.
func (c *Collector) Class(class *resourceapi.DeviceClass) {
	if class != nil {
		c.selectors(&c.classes, class.Spec.Selectors)
	}
}

// ClaimSpec adds what a claim (or a claim template's claim) reads: its
// requests' selectors, their alternatives', and the attributes its
// constraints match on.
func (c *Collector) ClaimSpec(spec *resourceapi.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			c.selectors(&c.claims, r.Exactly.Selectors)
		}
		for j := range r.FirstAvailable {
			c.selectors(&c.claims, r.FirstAvailable[j].Selectors)
		}
	}
	for _, con := range spec.Devices.Constraints {
		if con.MatchAttribute != nil {
			c.claims.add(short(string(*con.MatchAttribute)))
		}
	}
}

// Covers reports whether r holds everything spec reads.
func (c *Collector) Covers(r *Reads, spec *resourceapi.ResourceClaimSpec) bool {
	return c.reads(r, spec, false)
}

// Accounts reports whether r was made knowing what spec reads: spec
// reads only what r holds or left out, or reads every attribute (a
// claim's reads of every attribute are always left out).
func (c *Collector) Accounts(r *Reads, spec *resourceapi.ResourceClaimSpec) bool {
	return c.reads(r, spec, true)
}

func (c *Collector) reads(r *Reads, spec *resourceapi.ResourceClaimSpec, orLeft bool) bool {
	if r.all {
		return true
	}
	for i := range spec.Devices.Requests {
		req := &spec.Devices.Requests[i]
		if req.Exactly != nil && !c.coversSelectors(r, req.Exactly.Selectors, orLeft) {
			return false
		}
		for j := range req.FirstAvailable {
			if !c.coversSelectors(r, req.FirstAvailable[j].Selectors, orLeft) {
				return false
			}
		}
	}
	for _, con := range spec.Devices.Constraints {
		if con.MatchAttribute != nil && !r.holds(short(string(*con.MatchAttribute)), orLeft) {
			return false
		}
	}
	return true
}

// holds reports name in r (or, with orLeft, left out of it).
func (r *Reads) holds(name string, orLeft bool) bool {
	if _, ok := r.names[name]; ok {
		return true
	}
	_, ok := r.left[name]
	return ok && orLeft
}

// CoversClass reports whether r holds everything class reads.
func (c *Collector) CoversClass(r *Reads, class *resourceapi.DeviceClass) bool {
	return r.all || class == nil || c.coversSelectors(r, class.Spec.Selectors, false)
}

func (c *Collector) coversSelectors(r *Reads, sels []resourceapi.DeviceSelector, orLeft bool) bool {
	for _, s := range sels {
		if s.CEL == nil {
			continue
		}
		e := c.expr(s.CEL.Expression)
		if e.all {
			if orLeft {
				continue
			}
			return false
		}
		for _, n := range e.names {
			if !r.holds(n, orLeft) {
				return false
			}
		}
	}
	return true
}

// ClaimsOnly are the names claims and templates read that no class
// does, sorted: the ones Reads may leave out.
func (c *Collector) ClaimsOnly() []string {
	var out []string
	for n := range c.claims.names {
		if _, ok := c.classes.names[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Reads is the set gathered since the last Reset: every name the classes
// read, and the names claims and templates read less those leave says to
// leave out (of ClaimsOnly). A claim that reads a name left out, or reads
// every attribute, is not covered by the set (Covers): keys made with it
// must not serve its pods. A class that reads every attribute makes the
// set All.
func (c *Collector) Reads(leave func(name string) bool) *Reads {
	if c.classes.all {
		return All
	}
	r := &Reads{names: map[string]struct{}{}}
	var names []string
	for _, g := range []*gathered{&c.classes, &c.claims} {
		for n := range g.names {
			if _, ok := r.names[n]; ok {
				continue
			}
			if _, byClass := c.classes.names[n]; !byClass && leave != nil && leave(n) {
				if r.left == nil {
					r.left = map[string]struct{}{}
				}
				r.left[n] = struct{}{}
				continue
			}
			r.names[n] = struct{}{}
			names = append(names, n)
		}
	}
	slices.Sort(names)
	r.partial = len(r.left) > 0 || c.claims.all
	left := slices.Sorted(maps.Keys(r.left))
	// Sets of one key read alike and leave out alike.
	r.key = strings.Join(names, "\x00") + "\x01" + strings.Join(left, "\x00")
	return r
}

func (c *Collector) selectors(g *gathered, sels []resourceapi.DeviceSelector) {
	for _, s := range sels {
		if s.CEL == nil {
			continue
		}
		e := c.expr(s.CEL.Expression)
		if e.all {
			g.all = true
			continue
		}
		for _, n := range e.names {
			g.add(n)
		}
	}
}

func (g *gathered) add(name string) {
	if g.names == nil {
		g.names = map[string]struct{}{}
	}
	g.names[name] = struct{}{}
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
