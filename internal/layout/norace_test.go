package layout

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// noRaceLine is the test command's list of the packages it runs without
// the race detector.
var noRaceLine = regexp.MustCompile(`(?m)^norace=\(([^)]*)\)$`)

// noRaceByProcess are the packages of that list whose tests start
// goroutines (a program's run beside its deadline) but check nothing of
// their own concurrency: the simulator, which runs the cores on one
// goroutine, and the module tests, which build and run other programs.
var noRaceByProcess = []string{"sim", "internal/moduletest"}

// TestTestScriptRacesWhatCanRace: the test command (scripts/test) runs
// without the race detector only packages where it can find nothing —
// every core, whose code runs on one goroutine (TestCoresArePure) and
// whose tests start none, and the two noRaceByProcess — so that a core
// added later is listed (it would otherwise run three to eight times
// slower for nothing), and a package whose tests start goroutines is
// not (its races would go unchecked).
func TestTestScriptRacesWhatCanRace(t *testing.T) {
	top := root(t)
	script, err := os.ReadFile(filepath.Join(top, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	m := noRaceLine.FindSubmatch(script)
	if m == nil {
		t.Fatalf("scripts/test has no line %s", noRaceLine)
	}
	pkgs := modulePackages(t, top)
	listed := map[string]bool{}
	for _, pat := range strings.Fields(string(m[1])) {
		rel, ok := strings.CutPrefix(pat, "./")
		if !ok {
			t.Errorf("scripts/test's norace lists %q, not a ./ pattern", pat)
			continue
		}
		n := 0
		for p := range pkgs {
			if names(rel, p) {
				listed[p] = true
				n++
			}
		}
		if n == 0 {
			t.Errorf("scripts/test's norace lists %s, which is no package", pat)
		}
	}
	fset := token.NewFileSet()
	for p := range pkgs {
		switch {
		case isCore(p) && !listed[p]:
			t.Errorf("the core %s is not in scripts/test's norace list", p)
		case listed[p] && !isCore(p) && !slices.Contains(noRaceByProcess, p):
			t.Errorf("scripts/test runs %s without the race detector, but it is no core", p)
		case listed[p] && isCore(p):
			for _, at := range goStatements(t, fset, pkgs[p].dir) {
				t.Errorf("%s starts a goroutine (%s), but scripts/test runs its tests without the race detector", p, at)
			}
		}
	}
}

// goStatements are the go statements of every Go file in dir, tests
// included, as file:line.
func goStatements(t *testing.T, fset *token.FileSet, dir string) []string {
	t.Helper()
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range slices.Concat(bp.GoFiles, bp.TestGoFiles, bp.XTestGoFiles) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				p := fset.Position(g.Pos())
				out = append(out, fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line))
			}
			return true
		})
	}
	return out
}
