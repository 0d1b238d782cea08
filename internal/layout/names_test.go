package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sameNames reports every package name that two or more of the packages
// (by path relative to the module root) share, but main (programs) and
// the fork's, which keep upstream's names.
func sameNames(names map[string]string) []string {
	byName := map[string][]string{}
	for rel, name := range names {
		if name == "main" || forked(rel) {
			continue
		}
		byName[name] = append(byName[name], rel)
	}
	var bad []string
	for name, rels := range byName {
		if len(rels) > 1 {
			slices.Sort(rels)
			bad = append(bad, fmt.Sprintf("package name %s names %d packages: %s", name, len(rels), strings.Join(rels, ", ")))
		}
	}
	slices.Sort(bad)
	return bad
}

// forked says whether the package at rel is the fork's.
func forked(rel string) bool { return rel == "third_party" || strings.HasPrefix(rel, "third_party/") }

// aliased reports the imports of f that give a package of the module
// (mod) an alias that Aliases does not allow; a blank import names
// nothing and needs none.
func aliased(f *ast.File, mod string, at func(ast.Node) string) []string {
	var bad []string
	for _, im := range f.Imports {
		if im.Name == nil || im.Name.Name == "_" {
			continue
		}
		p, _ := strconv.Unquote(im.Path.Value)
		rel, ok := strings.CutPrefix(p, mod+"/")
		if !ok {
			continue
		}
		if want, ok := Aliases[rel]; ok && im.Name.Name == want {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: imports %s as %s; a package of the module is imported by its own name", at(im), rel, im.Name.Name))
	}
	return bad
}

// No two packages of the module (with the deploy module under it) share
// a name.
func TestPackageNamesAreUnique(t *testing.T) {
	pkgs := modulePackages(t, root(t))
	names := map[string]string{}
	for rel, p := range pkgs {
		names[rel] = p.name
	}
	if len(names) < 20 {
		t.Fatalf("found %d packages; the walk missed the module", len(names))
	}
	for _, b := range sameNames(names) {
		t.Error(b)
	}
}

// No file of the module, tests included, gives a package of the module
// an import alias, but those in Aliases.
func TestNoImportAliases(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	fset := token.NewFileSet()
	at := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		rel, _ := filepath.Rel(top, p.Filename)
		return filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line)
	}
	files := 0
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != top && (name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, b := range aliased(f, mod, at) {
			t.Error(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files; the walk missed the module", files)
	}
	pkgs := modulePackages(t, top)
	for rel, alias := range Aliases {
		if pkgs[rel] == nil {
			t.Errorf("layout.Aliases names %s, which is no package", rel)
		}
		if !forked(rel) {
			t.Errorf("layout.Aliases allows %s for %s, a package of Hoplite's own: rename it instead", alias, rel)
		}
	}
}

// The name rules catch what they forbid: two packages with one name, and
// an alias for a package of the module; programs, the fork, blank
// imports and other modules' packages pass.
func TestNameRulesCatchBreaches(t *testing.T) {
	bad := sameNames(map[string]string{
		"storenode": "storenode", "internal/actors/storenode": "storenode",
		"cmd/a": "main", "cmd/b": "main",
		"cluster": "cluster", "third_party/forked/protoactor-go/cluster": "cluster",
		"internal/reduction": "reduction",
	})
	if len(bad) != 1 || !strings.Contains(bad[0], "internal/actors/storenode, storenode") {
		t.Errorf("sameNames: %q, want one complaint about storenode", bad)
	}

	const mod = "example.com/m"
	src := `package p

import (
	_ "example.com/m/internal/x"
	mgr "example.com/m/internal/actors/barrier"
	"example.com/m/storenode"
	pcluster "example.com/m/third_party/forked/protoactor-go/cluster"
	act "example.com/m/third_party/forked/protoactor-go/actor"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	got := aliased(f, mod, func(n ast.Node) string { return strconv.Itoa(fset.Position(n.Pos()).Line) })
	want := []string{"5: imports internal/actors/barrier as mgr", "8: imports third_party/forked/protoactor-go/actor as act"}
	if len(got) != len(want) {
		t.Fatalf("aliased: %q, want %d complaints", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("aliased: complaint %q, want %q", got[i], w)
		}
	}
}

// upArrows reports each import from an internal package (relative path
// under internal/) to a public package of the module that UpImports does
// not name; imports maps a package to its module imports (relative).
func upArrows(imports map[string][]string) []string {
	var bad []string
	for rel, deps := range imports {
		if !strings.HasPrefix(rel, "internal/") {
			continue
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "internal/") || forked(dep) {
				continue
			}
			if _, ok := UpImports[dep]; !ok {
				bad = append(bad, fmt.Sprintf("%s imports the public package %s: an internal package is under the API, not over it (layout.UpImports)", rel, dep))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// No internal package imports a public one but those UpImports names.
func TestNoArrowRunsBackUp(t *testing.T) {
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
	for _, b := range upArrows(imports) {
		t.Error(b)
	}
	for k := range UpImports {
		if pkgs[k] == nil || strings.HasPrefix(k, "internal/") {
			t.Errorf("layout.UpImports names %s, which is no public package", k)
		}
	}
}

// The arrow rule catches an internal package importing the API, and lets
// through the wire, the fork, internal packages and public ones importing
// anything.
func TestArrowRuleCatchesBreaches(t *testing.T) {
	bad := upArrows(map[string][]string{
		"internal/actors/barrieractor": {"messages", "barrier/participant", "internal/barrier/replica", "third_party/forked/protoactor-go/actor"},
		"internal/reduction":           {"events", "fingerprint"},
		"internal/objstore":            {"transport", "internal/transport", "internal/bufalloc"},
		"cluster":                      {"internal/actors/storeactor", "barrier", "internal/transport"},
		"actors":                       {"internal/transport"},
	})
	want := []string{
		"internal/actors/barrieractor imports the public package barrier/participant",
		"internal/objstore imports the public package transport",
	}
	if len(bad) != len(want) {
		t.Fatalf("upArrows: %q, want complaints about %q", bad, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(bad[i], w) {
			t.Errorf("upArrows: complaint %q, want %q", bad[i], w)
		}
	}
}
