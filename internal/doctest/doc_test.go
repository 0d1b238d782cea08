package doctest

import (
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// documents are README.md and every page of docs/.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// fragmentPrelude declares what the documents' fragments (statements, not
// programs) take as given: an embedded cluster l, a context, gradient ids.
const fragmentPrelude = `package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

var (
	_ = log.Println
	_ = fmt.Sprint
	_ = time.Second
	_ = errors.Is
	_ barrier.Option
	_ messages.ReduceOp
	_ storenode.Client
)

func main() {
	var l *cluster.Local
	var ctx context.Context = context.Background()
	var grads []string
	_, _, _ = l, ctx, grads
`

// notUsed: the errors a fragment may leave, since nothing after it uses
// what it declares.
var notUsed = regexp.MustCompile(`declared and not used|imported and not used`)

// TestGoSnippetsCompile builds every Go block of the documents: a
// program as it is, a fragment inside a main with fragmentPrelude.
func TestGoSnippetsCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go command is needed to build the snippets")
	}
	n := 0
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
			n++
			buildSnippet(t, fmt.Sprintf("%s, Go block %d", doc, i+1), m[1])
		}
	}
	if n < 4 {
		t.Errorf("found %d Go blocks; the README alone has two", n)
	}
}

// docExamples are the public packages whose package documentation shows
// code (what `go doc` prints, where Example functions do not appear).
var docExamples = []string{"cluster", "storenode", "barrier"}

// TestPackageDocExamplesCompile builds the code blocks of the public
// packages' documentation as fragments, as TestGoSnippetsCompile does
// the documents'.
func TestPackageDocExamplesCompile(t *testing.T) {
	for _, pkg := range docExamples {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(root, pkg), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, p := range pkgs {
			for _, f := range p.Files {
				if f.Doc != nil {
					text += f.Doc.Text()
				}
			}
		}
		var parsed comment.Parser
		blocks := 0
		for _, b := range parsed.Parse(text).Content {
			if code, ok := b.(*comment.Code); ok {
				blocks++
				buildSnippet(t, fmt.Sprintf("package %s's documentation, code block %d", pkg, blocks), code.Text)
			}
		}
		if blocks == 0 {
			t.Errorf("package %s's documentation shows no code", pkg)
		}
	}
}

// buildSnippet builds src, a program or a fragment (statements, built
// inside a main after fragmentPrelude), and fails the test if it does not
// compile.
func buildSnippet(t *testing.T, what, src string) {
	t.Helper()
	fragment := !strings.HasPrefix(strings.TrimSpace(stripComments(src)), "package ")
	if fragment {
		src = fragmentPrelude + src + "}\n"
	}
	// Inside the module (a testdata directory, which ./... leaves
	// out), so that the snippet builds against this checkout.
	dir, err := os.MkdirTemp("testdata", "snippet-")
	if err != nil {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if dir, err = os.MkdirTemp("testdata", "snippet-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir); os.Remove("testdata") })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "build", "-o", os.DevNull, "./"+filepath.ToSlash(dir)).CombinedOutput()
	if err == nil {
		return
	}
	var real []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "main.go:") && !(fragment && notUsed.MatchString(line)) {
			real = append(real, line)
		}
	}
	if len(real) > 0 || !fragment {
		t.Errorf("%s does not compile:\n%s\n%s", what, out, numbered(src))
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinksResolve: every link of the documents that is not a URL
// names a file or directory of the repository (an anchor is not checked).
func TestRelativeLinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, m[1])
			}
		}
	}
}
