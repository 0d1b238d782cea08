package moduletest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/mod/module"
)

// upstreamPath is upstream Proto.Actor's module path.
const upstreamPath = "github.com/asynkron/protoactor-go"

// TestBesideUpstreamProtoActor builds and runs, in a module of its own,
// a program that links upstream Proto.Actor beside Hoplite
// (testdata/upstream): an upstream actor system and an embedded Hoplite
// cluster in one process, an object Put on one member and fetched on
// another, and an upstream actor's answer about it. Both register
// protobuf files, and the protobuf runtime panics at init on a file path
// or a full name registered twice: the copy inside Hoplite's module
// registers its files under Hoplite's names. Upstream is the version the
// copy is based on (third_party/README.md).
func TestBesideUpstreamProtoActor(t *testing.T) {
	root := moduleRoot(t)
	parent := readModFile(t, filepath.Join(root, "go.mod"))
	app := t.TempDir()
	copyFile(t, filepath.Join("testdata", "upstream", "main.go"), filepath.Join(app, "main.go"))
	writeDependentModFile(t, app, parent.Go.Version, root, module.Version{Path: upstreamPath, Version: forkBase(t, root)})
	// Hoplite's sums; upstream's own come from the checksum database.
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(app, "go.sum"))
	goCommand(t, app, nil, "mod", "tidy")

	bin := filepath.Join(app, "upstream")
	goCommand(t, app, nil, append(append([]string{"build"}, raceFlag...), "-o", bin, ".")...)
	out := command(t, programTimeout, app, nil, bin)
	if !regexp.MustCompile(`(?m)^hello, hoplite$`).MatchString(out) {
		t.Errorf("the program printed %q, want the line \"hello, hoplite\"", out)
	}
}

// forkBase is the version of upstream Proto.Actor that the copy inside
// Hoplite's module is based on, as third_party/README.md names it.
func forkBase(t *testing.T, root string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "third_party", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(upstreamPath) + `\s+at\s+(v[0-9][^\s)]*)`).FindSubmatch(readme)
	if m == nil {
		t.Fatalf("third_party/README.md names no version of %s", upstreamPath)
	}
	return string(m[1])
}
