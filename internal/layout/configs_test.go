package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testTalk is what a field's doc says when the field is for tests.
var testTalk = regexp.MustCompile(`(?i)\b(tests?|testing)\b|fault[- ]injection`)

// configFields reports the exported fields of the types named in types,
// declared in f, that are functions or whose doc speaks of tests; found
// collects the names of the types seen.
func configFields(f *ast.File, types []string, found map[string]bool, at func(ast.Node) string) []string {
	var bad []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, spec := range g.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !slices.Contains(types, ts.Name.Name) {
				continue
			}
			found[ts.Name.Name] = true
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					if !name.IsExported() {
						continue
					}
					if _, fn := field.Type.(*ast.FuncType); fn {
						bad = append(bad, fmt.Sprintf("%s: %s.%s is a function: a hook belongs in internal/testhooks (layout.Configs)", at(field), ts.Name.Name, name.Name))
					} else if field.Doc != nil && testTalk.MatchString(field.Doc.Text()) {
						bad = append(bad, fmt.Sprintf("%s: %s.%s is for tests (%q): it belongs in internal/testhooks or internal/experiments (layout.Configs)",
							at(field), ts.Name.Name, name.Name, testTalk.FindString(field.Doc.Text())))
					}
				}
			}
		}
	}
	return bad
}

// The configurations an operator reads hold nothing only tests set.
func TestConfigsHoldNothingForTests(t *testing.T) {
	top := root(t)
	for dir, types := range Configs {
		fset := token.NewFileSet()
		found := map[string]bool{}
		paths, err := filepath.Glob(filepath.Join(top, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(top, path)
			for _, b := range configFields(f, types, found, func(n ast.Node) string { return fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line) }) {
				t.Error(b)
			}
		}
		for _, typ := range types {
			if !found[typ] {
				t.Errorf("layout.Configs names %s.%s, which is no struct type there", dir, typ)
			}
		}
	}
}

// The rule catches a hook and a field documented as for tests, and lets
// through an operator's field and an unexported one.
func TestConfigRuleCatchesBreaches(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", `package cluster
type MemberConfig struct {
	// Bind is where the member listens.
	Bind string
	// ShardHook runs before each message a shard receives.
	ShardHook func(string, any)
	// ProbeDelay (fault injection) waits before a probe.
	ProbeDelay int
	// Version overrides the protocol version. Only for testing.
	Version uint32
	// hooks are a test's.
	hooks func()
}
type Other struct{ Hook func() }
`, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	got := configFields(f, []string{"MemberConfig"}, found, func(ast.Node) string { return "x.go" })
	want := []string{"MemberConfig.ShardHook is a function", "MemberConfig.ProbeDelay is for tests", "MemberConfig.Version is for tests"}
	if len(got) != len(want) || !found["MemberConfig"] || found["Other"] {
		t.Fatalf("configFields: %q (found %v), want complaints about %q", got, found, want)
	}
	for i, w := range want {
		if !regexp.MustCompile(regexp.QuoteMeta(w)).MatchString(got[i]) {
			t.Errorf("configFields: complaint %q, want %q", got[i], w)
		}
	}
}
