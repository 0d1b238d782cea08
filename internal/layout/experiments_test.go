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

// baselineFuncs reports the functions and methods of f named for a
// baseline.
func baselineFuncs(f *ast.File, at func(ast.Node) string) []string {
	var bad []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		for _, w := range Baselines {
			if strings.Contains(strings.ToLower(fn.Name.Name), w) {
				bad = append(bad, fmt.Sprintf("%s: %s is named for the %s baseline, which lives under %s (layout.Baselines)", at(fn), fn.Name.Name, w, Experiments))
			}
		}
	}
	return bad
}

// No actor shell or core imports the experiments, and no shell has a
// function of a baseline.
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
	shells := filepath.Join(top, "internal", "actors")
	for path, f := range sources(t, fset, shells, true) {
		rel, _ := filepath.Rel(top, path)
		for _, b := range baselineFuncs(f, func(n ast.Node) string { return fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line) }) {
			t.Error(b)
		}
	}
}

// The experiment rules catch a shell or a core importing an experiment
// and a shell's function named for a baseline, and let through the
// member and programs.
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
func reduce() {}
type Config struct{ Naive bool }
`, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := baselineFuncs(f, func(ast.Node) string { return "x.go" })
	if len(got) != 2 || !strings.Contains(got[0], "naiveReduce") || !strings.Contains(got[1], "gatherNaively") {
		t.Errorf("baselineFuncs: %q, want naiveReduce and gatherNaively", got)
	}
}
