package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// recvType is the name of a method's receiver type.
func recvType(fn *ast.FuncDecl) string {
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	case *ast.IndexListExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

// facadeArrows reports, of one package's files by base name (parsed with
// object resolution), the arrows that run from the member's files up to
// the facade's: a member file naming a package-level declaration of a
// facade file (an identifier its own file does not resolve), and a
// facade file declaring a method on a type no facade file declares.
func facadeArrows(files map[string]*ast.File, facade []string, at func(file string, n ast.Node) string) []string {
	up := map[string]string{} // facade's package-level names -> file
	types := map[string]bool{}
	for name, f := range files {
		if !slices.Contains(facade, name) {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					up[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						up[s.Name.Name], types[s.Name.Name] = name, true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							up[n.Name] = name
						}
					}
				}
			}
		}
	}
	var bad []string
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := files[name]
		if slices.Contains(facade, name) {
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && !types[recvType(fn)] {
					bad = append(bad, fmt.Sprintf("%s: the facade declares %s.%s, a method of the member's type %s: it belongs in a member file (layout.Facade)",
						at(name, fn), recvType(fn), fn.Name.Name, recvType(fn)))
				}
			}
			continue
		}
		seen := map[string]bool{}
		for _, id := range f.Unresolved {
			if from, ok := up[id.Name]; ok && !seen[id.Name] {
				seen[id.Name] = true
				bad = append(bad, fmt.Sprintf("%s: the member's file names %s of the facade's %s (layout.Facade)", at(name, id), id.Name, from))
			}
		}
	}
	return bad
}

// The member's files name nothing of the facade's, and the facade adds no
// method to the member's types: the embedded cluster is a facade over a
// member that could be a package of its own.
func TestFacadeOverTheMember(t *testing.T) {
	top := root(t)
	for dir, facade := range Facade {
		fset := token.NewFileSet()
		files := parseNonTest(t, fset, filepath.Join(top, dir))
		for _, name := range facade {
			if _, err := os.Stat(filepath.Join(top, dir, name)); err != nil {
				t.Errorf("layout.Facade names %s/%s: %v", dir, name, err)
			}
		}
		if len(files) <= len(facade) {
			t.Errorf("%s: no member files beside the facade's %d", dir, len(facade))
		}
		for _, b := range facadeArrows(files, facade, func(file string, n ast.Node) string {
			return fmt.Sprintf("%s/%s:%d", dir, file, fset.Position(n.Pos()).Line)
		}) {
			t.Error(b)
		}
	}
}

// The rule catches a member file that names the facade's type and
// function and a facade method on a member type, and lets through the
// facade's use of the member, a member's local name that shadows the
// facade's, and selectors.
func TestFacadeRuleCatchesBreaches(t *testing.T) {
	fset := token.NewFileSet()
	src := map[string]string{
		"local.go": `package cluster
type Local struct{ members []*Member }
func StartLocal() *Local { return &Local{members: []*Member{join()}} }
func (l *Local) Stop() { l.members[0].stop() }
func (m *Member) Client() int { return 0 }
`,
		"member.go": `package cluster
type Member struct{ local *Local }
func join() *Member { return &Member{} }
func (m *Member) stop() { _ = StartLocal }
func (m *Member) fine(x struct{ StartLocal int }) { StartLocal := 1; _ = StartLocal; _ = x.StartLocal }
`,
	}
	files := map[string]*ast.File{}
	for name, s := range src {
		f, err := parser.ParseFile(fset, name, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	got := facadeArrows(files, []string{"local.go"}, func(file string, n ast.Node) string {
		return fmt.Sprintf("%s:%d", file, fset.Position(n.Pos()).Line)
	})
	want := []string{
		"local.go:5: the facade declares Member.Client",
		"member.go:2: the member's file names Local",
		"member.go:4: the member's file names StartLocal",
	}
	if len(got) != len(want) {
		t.Fatalf("facadeArrows: %q, want %d complaints: %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("facadeArrows: complaint %q, want %q", got[i], w)
		}
	}
}

// typeKnots lists the cycles between files (by base name, each sorted)
// by the types they name: a file names another's type when one of its
// identifiers it does not resolve itself is a type that file declares.
func typeKnots(files map[string]*ast.File) [][]string {
	declared := map[string]string{}
	for name, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					declared[s.(*ast.TypeSpec).Name.Name] = name
				}
			}
		}
	}
	names := make([]string, 0, len(files))
	edges := map[string][]string{}
	for name, f := range files {
		names = append(names, name)
		for _, id := range f.Unresolved {
			if to, ok := declared[id.Name]; ok && to != name && !slices.Contains(edges[name], to) {
				edges[name] = append(edges[name], to)
			}
		}
		sort.Strings(edges[name])
	}
	sort.Strings(names)
	// Tarjan's strongly connected components.
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	var knots [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		on[v] = true
		for _, w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			sort.Strings(c)
			knots = append(knots, c)
		}
	}
	for _, v := range names {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Slice(knots, func(i, j int) bool { return knots[i][0] < knots[j][0] })
	return knots
}

// knotBreaches compares the knots found in dir with those layout.Knots
// lists.
func knotBreaches(dir string, knots [][]string, listed map[string]string) []string {
	var bad []string
	found := map[string]bool{}
	for _, k := range knots {
		key := dir + ": " + strings.Join(k, " ")
		found[key] = true
		if _, ok := listed[key]; !ok {
			bad = append(bad, fmt.Sprintf("%s: these files name each other's types in a cycle: put what they share in one of them, or let one hold an interface (layout.Knots)", key))
		}
	}
	for key := range listed {
		if strings.HasPrefix(key, dir+": ") && !found[key] {
			bad = append(bad, fmt.Sprintf("layout.Knots lists %q, which is no cycle (any more): remove it", key))
		}
	}
	sort.Strings(bad)
	return bad
}

// The files of cluster and of internal/member name each other's types
// without a cycle, but for the knots layout.Knots lists.
func TestNoNewKnots(t *testing.T) {
	top := root(t)
	dirs := map[string]bool{}
	for key := range Knots {
		dir, _, _ := strings.Cut(key, ": ")
		dirs[dir] = true
	}
	for dir := range Facade {
		dirs[dir] = true
	}
	for face, member := range Untied {
		dirs[face], dirs[member] = true, true
	}
	for dir := range dirs {
		files := parseNonTest(t, token.NewFileSet(), filepath.Join(top, dir))
		for _, b := range knotBreaches(dir, typeKnots(files), Knots) {
			t.Error(b)
		}
	}
}

// The knot rule finds a cycle through a receiver and a field, not one
// through a value of another file, and reports a knot that is not listed
// and a listed one that is gone.
func TestKnotRuleCatchesBreaches(t *testing.T) {
	src := map[string]string{
		"a.go": "package p\ntype A struct{ b *B }\nvar x = y\n",
		"b.go": "package p\ntype B struct{}\nfunc (b *B) c() *C { return nil }\n",
		"c.go": "package p\ntype C struct{}\nfunc (c *C) a() *A { return nil }\n",
		"d.go": "package p\ntype D struct{}\nvar y = z\n",
		"e.go": "package p\nvar z = D{}\nfunc f() { _ = x }\n",
	}
	files := map[string]*ast.File{}
	for name, s := range src {
		f, err := parser.ParseFile(token.NewFileSet(), name, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	knots := typeKnots(files)
	if len(knots) != 1 || strings.Join(knots[0], " ") != "a.go b.go c.go" {
		t.Fatalf("typeKnots: %q, want one knot: a.go b.go c.go", knots)
	}
	got := knotBreaches("p", knots, map[string]string{"p: d.go e.go": "gone"})
	if len(got) != 2 || !strings.HasPrefix(got[0], "layout.Knots lists \"p: d.go e.go\"") || !strings.HasPrefix(got[1], "p: a.go b.go c.go: these files") {
		t.Fatalf("knotBreaches: %q", got)
	}
	if got := knotBreaches("p", knots, map[string]string{"p: a.go b.go c.go": "listed"}); len(got) != 0 {
		t.Fatalf("knotBreaches of a listed knot: %q", got)
	}
}

// parseNonTest parses the Go files of dir that are not tests, by base
// name.
func parseNonTest(t *testing.T, fset *token.FileSet, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(path)] = f
	}
	return files
}

// untiedBreaches reports, for each face and its member package (Untied),
// what ties them: the member package missing, the face not built on it,
// the member reaching a package of the face's directory (imports maps a
// package to its module imports, relative; the member's are read
// transitively), and the face importing an actor shell FaceShells does not
// name.
func untiedBreaches(untied map[string]string, faceShells map[string]string, imports map[string][]string) []string {
	var bad []string
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	faces := make([]string, 0, len(untied))
	for face := range untied {
		faces = append(faces, face)
	}
	sort.Strings(faces)
	for _, face := range faces {
		member := untied[face]
		if _, ok := imports[member]; !ok {
			bad = append(bad, fmt.Sprintf("layout.Untied names %s, which is no package", member))
			continue
		}
		if !slices.Contains(imports[face], member) {
			bad = append(bad, fmt.Sprintf("%s does not import %s: the face is built on its member (layout.Untied)", face, member))
		}
		seen := map[string]bool{member: true}
		var path []string
		var walk func(p string)
		walk = func(p string) {
			path = append(path, p)
			for _, dep := range imports[p] {
				if under(dep, face) {
					bad = append(bad, fmt.Sprintf("%s reaches %s (%s): the member imports nothing of its face (layout.Untied)",
						member, dep, strings.Join(append(slices.Clone(path), dep), " -> ")))
					continue
				}
				if !seen[dep] {
					seen[dep] = true
					walk(dep)
				}
			}
			path = path[:len(path)-1]
		}
		walk(member)
		for _, dep := range imports[face] {
			if strings.HasPrefix(dep, "internal/actors/") {
				if _, ok := faceShells[dep]; !ok {
					bad = append(bad, fmt.Sprintf("%s imports the actor shell %s: the member (%s) wires the shells, the face calls the member (layout.FaceShells)", face, dep, member))
				}
			}
		}
	}
	return bad
}

// Package cluster is a face over internal/member: the member imports
// nothing of cluster, and cluster wires no actor shell.
func TestMemberUntied(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	imports := map[string][]string{}
	for rel, p := range modulePackages(t, top) {
		imports[rel] = []string{}
		for _, im := range p.imports {
			if dep, ok := strings.CutPrefix(im, mod+"/"); ok {
				imports[rel] = append(imports[rel], dep)
			}
		}
	}
	for _, b := range untiedBreaches(Untied, FaceShells, imports) {
		t.Error(b)
	}
	for shell := range FaceShells {
		if _, ok := imports[shell]; !ok {
			t.Errorf("layout.FaceShells names %s, which is no package", shell)
		}
	}
}

// The untied rule catches a member that imports its face, directly or
// through another package, a face that is not built on its member, a
// face that wires an actor shell, and a member package that is gone;
// it lets a face import the shells FaceShells names.
func TestUntiedRuleCatchesBreaches(t *testing.T) {
	imports := map[string][]string{
		"cluster":                      {"internal/member", "internal/actors/storeactor", "internal/actors/barrieractor"},
		"cluster/sub":                  {},
		"internal/member":              {"internal/helper", "messages"},
		"internal/helper":              {"cluster/sub"},
		"messages":                     {},
		"internal/actors/storeactor":   {},
		"internal/actors/barrieractor": {},
		"pub":                          {"internal/other"},
		"internal/other":               {"pub"},
	}
	got := untiedBreaches(map[string]string{"cluster": "internal/member", "pub": "internal/other", "gone": "internal/gone"},
		map[string]string{"internal/actors/barrieractor": "allowed"}, imports)
	want := []string{
		"internal/member reaches cluster/sub (internal/member -> internal/helper -> cluster/sub)",
		"cluster imports the actor shell internal/actors/storeactor",
		"layout.Untied names internal/gone",
		"internal/other reaches pub (internal/other -> pub)",
	}
	if len(got) != len(want) {
		t.Fatalf("untiedBreaches: %q, want %d complaints: %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("untiedBreaches: complaint %q, want %q", got[i], w)
		}
	}
	imports["cluster"] = []string{"internal/actors/barrieractor"}
	if got := untiedBreaches(map[string]string{"cluster": "internal/member"}, nil, imports); len(got) != 3 || !strings.HasPrefix(got[0], "cluster does not import internal/member") {
		t.Errorf("untiedBreaches of a face beside its member: %q, want it not built on it first", got)
	}
}
