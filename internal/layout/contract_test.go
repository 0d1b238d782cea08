package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const outboxPath = "internal/outbox"

// contract is what one core package's files say about the one contract:
// per type with a method that returns the Box, its Step and the other
// such methods.
type contract struct {
	step    map[string]*ast.FuncDecl // type -> its Step
	entries map[string][]string      // type -> exported methods but Step returning the Box
	bad     []string
}

// typeName is the name of a receiver or result type: T, *T, T[P] or
// *T[P] ("" for anything else).
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// isBox says whether e, in a file that names internal/outbox as ob,
// is outbox.Box.
func isBox(e ast.Expr, ob string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || ob == "" {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == ob && s.Sel.Name == "Box"
}

// checkContract reads one core package's files (mod is the module
// path): every struct type that embeds outbox.Box is an output, every
// type with a method that returns one (or the Box itself) is a core,
// and a core has Step(now time.Time, ev E) O with O an output, and no
// other exported method that returns one.
func checkContract(files []*ast.File, mod string, at func(ast.Node) string) contract {
	c := contract{step: map[string]*ast.FuncDecl{}, entries: map[string][]string{}}
	outputs := map[string]bool{}
	obName := map[*ast.File]string{}
	for _, f := range files {
		ob := importName(f, mod+"/"+outboxPath)
		obName[f] = ob
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					if len(fl.Names) == 0 && isBox(fl.Type, ob) {
						outputs[ts.Name.Name] = true
					}
				}
			}
		}
	}
	output := func(e ast.Expr, ob string) bool { return isBox(e, ob) || outputs[typeName(e)] }
	for _, f := range files {
		ob := obName[f]
		tm := importName(f, "time")
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || !fn.Name.IsExported() {
				continue
			}
			recv := typeName(fn.Recv.List[0].Type)
			res := fn.Type.Results
			returnsOutput := res != nil && len(res.List) > 0 && output(res.List[0].Type, ob)
			if fn.Name.Name != "Step" {
				if returnsOutput {
					c.entries[recv] = append(c.entries[recv], fn.Name.Name)
				}
				continue
			}
			c.step[recv] = fn
			var params []ast.Expr
			for _, p := range fn.Type.Params.List {
				for range max(len(p.Names), 1) {
					params = append(params, p.Type)
				}
			}
			now := len(params) > 0
			if now {
				s, ok := params[0].(*ast.SelectorExpr)
				x, _ := func() (*ast.Ident, bool) {
					if !ok {
						return nil, false
					}
					i, ok := s.X.(*ast.Ident)
					return i, ok
				}()
				now = ok && x != nil && tm != "" && x.Name == tm && s.Sel.Name == "Time"
			}
			switch {
			case len(params) != 2 || !now:
				c.bad = append(c.bad, fmt.Sprintf("%s: %s.Step takes (now time.Time, event), the time first", at(fn), recv))
			case res == nil || len(res.List) != 1 || len(res.List[0].Names) > 1:
				c.bad = append(c.bad, fmt.Sprintf("%s: %s.Step returns one output (an error is a field of it)", at(fn), recv))
			case !returnsOutput:
				c.bad = append(c.bad, fmt.Sprintf("%s: %s.Step returns an output that does not embed outbox.Box", at(fn), recv))
			}
		}
	}
	return c
}

// contractBreaches turns what checkContract found in the package at rel
// into the rule's breaches, given the exemptions.
func contractBreaches(rel string, c contract, exempt map[string]string) []string {
	bad := slices.Clone(c.bad)
	var types []string
	for t := range c.entries {
		types = append(types, t)
	}
	for t := range c.step {
		if _, ok := c.entries[t]; !ok {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	for _, t := range types {
		key := rel + "." + t
		_, excused := exempt[key]
		switch {
		case excused && c.step[t] != nil && len(c.entries[t]) == 0:
			bad = append(bad, fmt.Sprintf("layout.Unstepped lists %s, which keeps the contract: drop it from the list", key))
		case excused:
		case c.step[t] == nil:
			bad = append(bad, fmt.Sprintf("%s returns its output from %s but has no Step(now, event): the one contract", key, strings.Join(c.entries[t], ", ")))
		case len(c.entries[t]) > 0:
			bad = append(bad, fmt.Sprintf("%s has Step and other ways in that return its output (%s): make them events of Step", key, strings.Join(c.entries[t], ", ")))
		}
	}
	return bad
}

// Every core keeps the one contract: a type that returns the Box does
// so from Step(now time.Time, event) alone, and Step's one output
// embeds outbox.Box (layout.Unstepped lists what is not there yet); and
// every core package has such a type, or layout.Stepless says why not.
func TestCoresKeepTheContract(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	fset := token.NewFileSet()
	at := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		rel, _ := filepath.Rel(top, p.Filename)
		return filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line)
	}
	stepped := 0
	seen := map[string]bool{}
	cores := map[string]coreShape{}
	for rel, p := range modulePackages(t, top) {
		if !isCore(rel) {
			continue
		}
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		c := checkContract(files, mod, at)
		for _, b := range contractBreaches(rel, c, Unstepped) {
			t.Error(b)
		}
		cores[rel] = coreShape{steps: len(c.step) > 0, takesTime: takesTime(files)}
		for tn := range c.step {
			stepped++
			seen[rel+"."+tn] = true
		}
		for tn := range c.entries {
			seen[rel+"."+tn] = true
		}
	}
	if stepped == 0 {
		t.Fatal("no core has Step")
	}
	for k := range Unstepped {
		if !seen[k] {
			t.Errorf("layout.Unstepped lists %s, which returns no output", k)
		}
	}
	for _, b := range steplessBreaches(cores, Stepless) {
		t.Error(b)
	}
}

// coreShape is what the rule of Stepless reads of one core package:
// whether a type of it has Step, and an exported method, if any, that
// takes the time ("" for none).
type coreShape struct {
	steps     bool
	takesTime string
}

// takesTime names an exported method of the files whose parameters
// include a time.Time ("T.M"; "" for none): the mark of a state machine
// given the time, which the contract's Step takes instead. The Box's
// own After, which asks for a timer, is not one.
func takesTime(files []*ast.File) string {
	for _, f := range files {
		tm := importName(f, "time")
		if tm == "" || f.Name.Name == "outbox" {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || !fn.Name.IsExported() || fn.Name.Name == "Step" {
				continue
			}
			for _, p := range fn.Type.Params.List {
				if s, ok := p.Type.(*ast.SelectorExpr); ok && s.Sel.Name == "Time" {
					if x, ok := s.X.(*ast.Ident); ok && x.Name == tm {
						return typeName(fn.Recv.List[0].Type) + "." + fn.Name.Name
					}
				}
			}
		}
	}
	return ""
}

// notThereYet begins the reason of a Stepless entry that is a state
// machine not on the contract yet.
const notThereYet = "not there yet:"

// steplessBreaches checks the core packages (relative path -> shape)
// against the Stepless list.
func steplessBreaches(cores map[string]coreShape, stepless map[string]string) []string {
	var bad []string
	for _, rel := range slices.Sorted(maps.Keys(cores)) {
		c := cores[rel]
		why, listed := stepless[rel]
		switch {
		case c.steps && listed:
			bad = append(bad, fmt.Sprintf("layout.Stepless lists %s, which has a Step: drop it from the list", rel))
		case !c.steps && !listed:
			bad = append(bad, fmt.Sprintf("core %s has no type with Step(now, event): the one contract (or, if it is no state machine, say why in layout.Stepless)", rel))
		case !c.steps && c.takesTime != "" && !strings.HasPrefix(why, notThereYet):
			bad = append(bad, fmt.Sprintf("core %s takes the time in %s, a state machine: give it Step(now, event), or list it in layout.Stepless as %q and what is left", rel, c.takesTime, notThereYet))
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(stepless)) {
		if _, ok := cores[rel]; !ok {
			bad = append(bad, fmt.Sprintf("layout.Stepless lists %s, which is no core package", rel))
		}
	}
	return bad
}

// The rule of Stepless catches a core with no Step that is not listed,
// a listed one that steps, a state machine listed as a library, and an
// entry that names no core.
func TestSteplessRuleCatchesBreaches(t *testing.T) {
	cores := map[string]coreShape{
		"good":    {steps: true},
		"lib":     {},
		"pending": {takesTime: "View.SetNow"},
		"stale":   {steps: true},
		"bare":    {},
		"hidden":  {takesTime: "Clock.Advance"},
	}
	got := strings.Join(steplessBreaches(cores, map[string]string{
		"lib": "pure functions", "pending": notThereYet + " events later", "stale": "was a library",
		"hidden": "pure, they say", "gone": "a package that left",
	}), "\n")
	for _, want := range []string{
		"layout.Stepless lists stale, which has a Step",
		"core bare has no type with Step",
		"core hidden takes the time in Clock.Advance",
		"layout.Stepless lists gone, which is no core package",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no breach %q in:\n%s", want, got)
		}
	}
	for _, clean := range []string{"good", "lib", "pending"} {
		if strings.Contains(got, " "+clean+" ") || strings.Contains(got, " "+clean+",") {
			t.Errorf("%s reported:\n%s", clean, got)
		}
	}
}

// The contract rule catches a core without Step, a Step with the time
// elsewhere or a second result, an output without the Box, and a second
// way in; an exemption that is no longer needed is reported.
func TestContractRuleCatchesBreaches(t *testing.T) {
	const src = `package p

import (
	"time"

	"example.com/m/internal/outbox"
)

type Output struct {
	outbox.Box
	Done bool
}

type Plain struct{ N int }

type Good struct{}

func (g *Good) Step(now time.Time, ev any) Output { return Output{} }
func (g *Good) Len() int                           { return 0 }

type NoStep struct{}

func (n *NoStep) Located(now time.Time) Output { return Output{} }

type Tuple struct{}

func (x *Tuple) Step(now time.Time, ev any) (Output, error) { return Output{}, nil }

type Late struct{}

func (x *Late) Step(ev any, now time.Time) Output { return Output{} }

type Boxless struct{}

func (x *Boxless) Step(now time.Time, ev any) Plain { return Plain{} }

type Twice struct{}

func (x *Twice) Step(now time.Time, ev any) Output { return Output{} }
func (x *Twice) Tick(now time.Time) outbox.Box     { return outbox.Box{} }

type Excused struct{}

func (x *Excused) Done() Output { return Output{} }

type Stale struct{}

func (x *Stale) Step(now time.Time, ev any) Output { return Output{} }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	at := func(n ast.Node) string { return "p.go:" + strconv.Itoa(fset.Position(n.Pos()).Line) }
	c := checkContract([]*ast.File{f}, "example.com/m", at)
	got := strings.Join(contractBreaches("p", c, map[string]string{"p.Excused": "later", "p.Stale": "later"}), "\n")
	for _, want := range []string{
		"p.NoStep returns its output from Located but has no Step",
		"Tuple.Step returns one output",
		"Late.Step takes (now time.Time, event)",
		"Boxless.Step returns an output that does not embed outbox.Box",
		"p.Twice has Step and other ways in that return its output (Tick)",
		"layout.Unstepped lists p.Stale, which keeps the contract",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no breach %q in:\n%s", want, got)
		}
	}
	for _, clean := range []string{"p.Good", "Good.Step", "p.Excused"} {
		if strings.Contains(got, clean) {
			t.Errorf("%s reported:\n%s", clean, got)
		}
	}
}
