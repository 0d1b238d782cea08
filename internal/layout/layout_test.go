package layout

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const protoactor = "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go"

// root is the module root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", abs, err)
	}
	return abs
}

// sources parses the non-test Go files under dir (recursively if deep),
// skipping third_party and testdata.
func sources(t *testing.T, fset *token.FileSet, dir string, deep bool) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (!deep || name == "third_party" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// importName is the name a file uses for an import path ("" if it does
// not import it).
func importName(f *ast.File, path string) string {
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p != path {
			continue
		}
		if im.Name != nil {
			return im.Name.Name
		}
		return path[strings.LastIndex(path, "/")+1:]
	}
	return ""
}

// clock lists the time functions that read or wait on the clock.
var clock = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}

// pkg is one package of the module as the build sees it.
type pkg struct {
	rel     string   // path relative to the module root ("" for the root)
	dir     string   // its directory
	name    string   // its package clause
	files   []string // its non-test Go files (base names)
	imports []string // its non-test imports
}

// modulePackages lists the module's packages: every directory with
// non-test Go files, as go/build selects them for this platform.
func modulePackages(t *testing.T, top string) map[string]*pkg {
	t.Helper()
	out := map[string]*pkg{}
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != top && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(path, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(top, path)
		rel = filepath.ToSlash(rel)
		out[rel] = &pkg{rel: rel, dir: path, name: bp.Name, files: bp.GoFiles, imports: bp.Imports}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// names says whether the key k of Shells or Cores names the package at
// rel: itself, or a directory above it ("dir/...").
func names(k, rel string) bool {
	if dir, ok := strings.CutSuffix(k, "/..."); ok {
		return rel == dir || strings.HasPrefix(rel, dir+"/")
	}
	return rel == k
}

// shell says whether the package at rel is a shell (Shells, but not
// Cores).
func shell(rel string) bool {
	for _, k := range Cores {
		if names(k, rel) {
			return false
		}
	}
	for k := range Shells {
		if names(k, rel) {
			return true
		}
	}
	return false
}

// isCore says whether the package at rel is a core: the module's
// packages but the shells and the wire.
func isCore(rel string) bool { return !shell(rel) && !slices.Contains(Wire, rel) }

// forbidden says whether the standard package path is Forbidden.
func forbidden(path string) bool {
	for _, f := range Forbidden {
		if path == f || strings.HasPrefix(path, f+"/") {
			return true
		}
	}
	return false
}

// checkFile reports the core rules f breaks; at names a position. mod
// is the module path; core says whether a module package (relative path)
// is a core.
func checkFile(f *ast.File, mod string, core func(rel string) bool, at func(ast.Node) string) []string {
	var bad []string
	actorName := importName(f, mod+"/third_party/forked/protoactor-go/actor")
	timeName := importName(f, "time")
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		rel, inModule := strings.CutPrefix(p, mod+"/")
		switch {
		case inModule && slices.Contains(Wire, rel):
		case inModule && !core(rel):
			bad = append(bad, fmt.Sprintf("%s: imports %s, a shell (%s); a core imports only cores", at(im), rel, reason(rel)))
		case inModule:
		case !strings.Contains(strings.SplitN(p, "/", 2)[0], "."): // the standard library
			if forbidden(p) {
				bad = append(bad, fmt.Sprintf("%s: imports %s; a core has no locks, contexts or I/O", at(im), p))
			}
		case !slices.Contains(Allowed, p):
			bad = append(bad, fmt.Sprintf("%s: imports %s, which is not in layout.Allowed", at(im), p))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			bad = append(bad, at(n)+": a go statement in a core")
		case *ast.ChanType:
			bad = append(bad, at(n)+": a channel in a core; it returns what to send instead")
		case *ast.SelectStmt:
			bad = append(bad, at(n)+": a select in a core")
		case *ast.SendStmt:
			bad = append(bad, at(n)+": a channel send in a core")
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				bad = append(bad, at(n)+": a channel receive in a core")
			}
		case *ast.SelectorExpr:
			x, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch {
			case actorName != "" && x.Name == actorName && n.Sel.Name != "PID":
				bad = append(bad, fmt.Sprintf("%s: uses actor.%s; a core names only actor.PID", at(n), n.Sel.Name))
			case timeName != "" && x.Name == timeName && clock[n.Sel.Name]:
				bad = append(bad, fmt.Sprintf("%s: calls time.%s; a core takes the time as a value", at(n), n.Sel.Name))
			}
		}
		return true
	})
	return bad
}

// reason is why Shells names the package at rel: the reason of the
// longest key that names it.
func reason(rel string) string {
	why, best := "not a core", ""
	for k, w := range Shells {
		if names(k, rel) && len(k) > len(best) {
			why, best = w, k
		}
	}
	return why
}

func modulePath(t *testing.T, top string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// Every file of every core package keeps the core rules.
func TestCoresArePure(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	pkgs := modulePackages(t, top)
	fset := token.NewFileSet()
	at := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		rel, _ := filepath.Rel(top, p.Filename)
		return filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line)
	}
	checked := 0
	for rel, p := range pkgs {
		if !isCore(rel) {
			continue
		}
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range checkFile(f, mod, isCore, at) {
				t.Error(b)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no core file found")
	}
	for k := range Shells {
		dir, _ := strings.CutSuffix(k, "/...")
		if _, err := os.Stat(filepath.Join(top, dir)); err != nil {
			t.Errorf("layout.Shells names %s, which does not exist", k)
		}
	}
	for _, c := range Cores {
		found := false
		for rel := range pkgs {
			found = found || names(c, rel)
		}
		if !found {
			t.Errorf("layout.Cores names %s, which is no package", c)
		}
	}
}

// No core reaches a shell through the packages it imports, however
// indirectly (the module part of the import graph, as go/build reads it): the chain is
// reported, so that a core that imports a core that imports internal/transport
// shows where the arrow runs back up.
func TestCoresReachNoShell(t *testing.T) {
	top := root(t)
	mod := modulePath(t, top)
	pkgs := modulePackages(t, top)
	for rel := range pkgs {
		if !isCore(rel) {
			continue
		}
		// Breadth first over the module's packages, remembering how each
		// was reached.
		from := map[string]string{rel: ""}
		queue := []string{rel}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			p := pkgs[cur]
			if p == nil {
				continue
			}
			for _, im := range p.imports {
				dep, ok := strings.CutPrefix(im, mod+"/")
				if !ok || slices.Contains(Wire, dep) {
					continue
				}
				if _, seen := from[dep]; seen {
					continue
				}
				from[dep] = cur
				if !isCore(dep) {
					chain := []string{dep}
					for c := cur; c != ""; c = from[c] {
						chain = append(chain, c)
					}
					slices.Reverse(chain)
					t.Errorf("core %s reaches the shell %s (%s): %s", rel, dep, reason(dep), strings.Join(chain, " -> "))
					continue
				}
				queue = append(queue, dep)
			}
		}
	}
}

// The rules catch what they forbid: a core file with each kind of
// breach gets one complaint per breach, and a clean one none.
func TestCoreRulesCatchBreaches(t *testing.T) {
	const mod = "example.com/m"
	src := `package p

import (
	"sync"
	"time"
	"net/http"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"example.com/m/internal/transport"
	"example.com/m/outbox"
	"example.com/m/messages"
	act "example.com/m/third_party/forked/protoactor-go/actor"
	"example.com/m/third_party/forked/protoactor-go/remote"
)

var mu sync.Mutex

func f(pid *act.PID, d time.Duration) {
	go f(pid, d)
	_ = time.Now()
	time.Sleep(d)
	_ = act.NewPID("a", "b")
	ch := make(chan int)
	ch <- 1
	<-ch
	select {}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	core := func(rel string) bool { return rel == "outbox" }
	bad := checkFile(f, mod, core, func(n ast.Node) string { return strconv.Itoa(fset.Position(n.Pos()).Line) })
	want := []string{
		"4: imports sync", "6: imports net/http", "7: imports github.com/sirupsen/logrus",
		"10: imports internal/transport", "14: imports third_party/forked/protoactor-go/remote",
		"20: a go statement", "21: calls time.Now", "22: calls time.Sleep", "23: uses actor.NewPID",
		"24: a channel in a core", "25: a channel send", "26: a channel receive", "27: a select",
	}
	for _, w := range want {
		found := false
		for _, b := range bad {
			found = found || strings.HasPrefix(b, w)
		}
		if !found {
			t.Errorf("no complaint %q; got:\n%s", w, strings.Join(bad, "\n"))
		}
	}
	if len(bad) != len(want) {
		t.Errorf("%d complaints, want %d:\n%s", len(bad), len(want), strings.Join(bad, "\n"))
	}

	clean := `package p

import (
	"time"

	"example.com/m/messages"
	"example.com/m/outbox"
	"example.com/m/third_party/forked/protoactor-go/actor"
)

func g(now time.Time, pid *actor.PID, m *messages.Error) (outbox.Send, time.Time) {
	return outbox.Send{}, now.Add(time.Second)
}
`
	f, err = parser.ParseFile(fset, "q.go", clean, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	if bad := checkFile(f, mod, core, func(n ast.Node) string { return "" }); len(bad) > 0 {
		t.Errorf("a clean core file got complaints: %v", bad)
	}
}

func TestActorsLiveInActorsAndCluster(t *testing.T) {
	top := root(t)
	for path, f := range sources(t, token.NewFileSet(), top, true) {
		rel, _ := filepath.Rel(top, path)
		rel = filepath.ToSlash(rel)
		if hasPrefix(rel, ActorHomes) || hasPrefix(rel, Programs) {
			continue
		}
		actorName := importName(f, protoactor+"/actor")
		if actorName == "" {
			continue
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Receive" || fn.Type.Params.NumFields() != 1 {
				continue
			}
			if sel, ok := fn.Type.Params.List[0].Type.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == actorName && sel.Sel.Name == "Context" {
					t.Errorf("%s declares an actor (%s.Receive): actors live in %s", rel, recvName(fn), strings.Join(ActorHomes, ", "))
				}
			}
		}
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func recvName(fn *ast.FuncDecl) string {
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
