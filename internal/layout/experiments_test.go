package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// experimentArrows reports each import of Experiments (or a package
// under it) by an actor shell or a core; imports maps a package to its
// module imports (relative), core says whether a package is a core.
func experimentArrows(imports map[string][]string, core func(rel string) bool) []string {
	var bad []string
	for rel, deps := range imports {
		if !strings.HasPrefix(rel, "internal/actors/") && !core(rel) {
			continue
		}
		for _, dep := range deps {
			if dep == Experiments || strings.HasPrefix(dep, Experiments+"/") {
				bad = append(bad, fmt.Sprintf("%s imports %s: experiments are wired in front of the shells, not inside them (layout.Experiments)", rel, dep))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// baselineNames reports what f declares under a name of a baseline:
// functions, methods, types, package-level constants and variables, and
// the fields of its structs (a switch such as Config.Naive). A local
// variable's name is its function's business.
func baselineNames(f *ast.File, at func(ast.Node) string) []string {
	var bad []string
	check := func(id *ast.Ident, what string) {
		for _, w := range Baselines {
			if strings.Contains(strings.ToLower(id.Name), w) {
				bad = append(bad, fmt.Sprintf("%s: %s %s is named for the %s baseline, which lives under %s (layout.Baselines)", at(id), what, id.Name, w, Experiments))
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			check(d.Name, "function")
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if v, ok := s.(*ast.ValueSpec); ok {
					for _, id := range v.Names {
						check(id, "value")
					}
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			check(n.Name, "type")
		case *ast.StructType:
			for _, fl := range n.Fields.List {
				for _, id := range fl.Names {
					check(id, "field")
				}
			}
		}
		return true
	})
	return bad
}

// baselineFree says whether the package at rel must name no baseline:
// the wire messages, and every production package under internal/ (the
// shells, the cores, the store node's fetch runner, the directory) but
// the experiments themselves and this package, which names the rule.
func baselineFree(rel string) bool {
	return rel == "messages" || strings.HasPrefix(rel, "internal/") && rel != Experiments && !strings.HasPrefix(rel, Experiments+"/") && rel != "internal/layout"
}

// No actor shell or core imports the experiments, and neither the wire
// messages nor a production package under internal/ declares anything
// named for a baseline.
func TestExperimentsStayOutOfTheShells(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	pkgs := modulePackages(t, top)
	imports := map[string][]string{}
	for rel, p := range pkgs {
		for _, im := range p.imports {
			if dep, ok := strings.CutPrefix(im, mod+"/"); ok {
				imports[rel] = append(imports[rel], dep)
			}
		}
	}
	if pkgs[Experiments] == nil {
		t.Fatalf("no package %s: has it moved?", Experiments)
	}
	for _, b := range experimentArrows(imports, isCore) {
		t.Error(b)
	}
	fset := token.NewFileSet()
	checked := 0
	for rel, p := range pkgs {
		if !baselineFree(rel) {
			continue
		}
		for _, name := range p.files {
			path := filepath.Join(p.dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, b := range baselineNames(f, func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", rel, name, fset.Position(n.Pos()).Line) }) {
				t.Error(b)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no production file under internal/ checked for baseline names")
	}
}

// The experiment rules catch a shell or a core importing an experiment
// and a production declaration named for a baseline, and let through the
// member, programs, the experiments and local variables.
func TestExperimentRulesCatchBreaches(t *testing.T) {
	bad := experimentArrows(map[string][]string{
		"internal/actors/storeactor": {"messages", Experiments + "/naive"},
		"internal/reduction":         {Experiments},
		"cluster":                    {Experiments, Experiments + "/naive"},
		"bench":                      {Experiments},
	}, func(rel string) bool { return rel == "internal/reduction" })
	want := []string{"internal/actors/storeactor imports " + Experiments + "/naive", "internal/reduction imports " + Experiments}
	if len(bad) != len(want) {
		t.Fatalf("experimentArrows: %q, want complaints about %q", bad, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(bad[i], w+":") {
			t.Errorf("experimentArrows: complaint %q, want %q", bad[i], w)
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", `package storeactor
func (n *StoreNode) naiveReduce() {}
func gatherNaively() {}
func reduce(naive bool) { var naiveToo bool; _ = naiveToo }
type Config struct{ Naive bool; Senders func() }
type naiveWaiter struct{}
const NaiveShape = "x"
var fromCreator, chosen = 1, 2
`, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := baselineNames(f, func(ast.Node) string { return "x.go" })
	wantNames := []string{"function naiveReduce", "function gatherNaively", "value NaiveShape", "field Naive", "type naiveWaiter"}
	for _, w := range wantNames {
		if !slices.ContainsFunc(got, func(b string) bool { return strings.Contains(b, " "+w+" ") }) {
			t.Errorf("baselineNames: %q, want a complaint about %s", got, w)
		}
	}
	if len(got) != len(wantNames) {
		t.Errorf("baselineNames: %d complaints %q, want %d", len(got), got, len(wantNames))
	}
	for rel, want := range map[string]bool{"internal/directory": true, "internal/actors/storeactor": true, "internal/fetchrun": true,
		"messages": true, Experiments: false, Experiments + "/naive": false, "cluster": false, "internal/layout": false} {
		if baselineFree(rel) != want {
			t.Errorf("baselineFree(%s) = %v, want %v", rel, !want, want)
		}
	}
}
