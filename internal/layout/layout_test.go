package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
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

func TestPurePackagesAreClockAndActorFree(t *testing.T) {
	top := root(t)
	fset := token.NewFileSet()
	at := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		rel, _ := filepath.Rel(top, p.Filename)
		return rel + ":" + strconv.Itoa(p.Line)
	}
	for _, pkg := range Pure {
		// A file (storenode's protocols) or a package's directory.
		files := sources(t, fset, filepath.Join(top, pkg), false)
		if len(files) == 0 {
			t.Errorf("%s: no Go files (the list in layout.Pure is stale)", pkg)
		}
		for path, f := range files {
			rel, _ := filepath.Rel(top, path)
			actorName := importName(f, protoactor+"/actor")
			timeName := importName(f, "time")
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(p, protoactor) && p != protoactor+"/actor" {
					t.Errorf("%s imports %s: a pure package uses nothing of Proto.Actor but actor.PID", rel, p)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: a go statement in a pure package", at(n))
				case *ast.SelectorExpr:
					x, ok := n.X.(*ast.Ident)
					if !ok {
						return true
					}
					switch {
					case actorName != "" && x.Name == actorName && n.Sel.Name != "PID":
						t.Errorf("%s: uses actor.%s; a pure package names only actor.PID", at(n), n.Sel.Name)
					case timeName != "" && x.Name == timeName && clock[n.Sel.Name]:
						t.Errorf("%s: calls time.%s; a pure package takes the time as a value", at(n), n.Sel.Name)
					}
				}
				return true
			})
		}
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
					t.Errorf("%s declares an actor (%s.Receive): actors live in actors/ or cluster/", rel, recvName(fn))
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
