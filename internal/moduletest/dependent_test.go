package moduletest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// TestDependentModule builds what a user builds: in a module of its own
// that requires Hoplite, the README's program (examples/quickstart), an
// application of Proto.Actor actors that Put and Get objects through
// store nodes (examples/broadcast, which imports Proto.Actor from the
// copy inside Hoplite's module) and the hoplite command; then runs them.
// The dependent replaces only Hoplite's module path, with this checkout:
// Go ignores a dependency's own replace directives, so everything else
// comes from Hoplite's go.mod requirements, as it would for a user.
func TestDependentModule(t *testing.T) {
	root := moduleRoot(t)
	parent := readModFile(t, filepath.Join(root, "go.mod"))
	app := t.TempDir()
	// Copied, not imported: the programs must compile as another module's
	// code, which may not import Hoplite's internal packages.
	for _, p := range []string{"quickstart", "actor", "broadcast"} {
		copyFile(t, filepath.Join(root, "examples", p, "main.go"), filepath.Join(app, p, "main.go"))
	}
	writeDependentModFile(t, app, parent.Go.Version, root)
	// Hoplite's sums: tidy needs the checksum database for nothing
	// Hoplite already requires.
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(app, "go.sum"))
	goCommand(t, app, nil, "mod", "tidy")
	sameVersions(t, parent, readModFile(t, filepath.Join(app, "go.mod")))

	bin := filepath.Join(app, "bin") + string(filepath.Separator)
	build := append(append([]string{"build"}, raceFlag...), "-o", bin,
		"./quickstart", "./actor", "./broadcast", modulePath+"/cmd/hoplite")
	goCommand(t, app, nil, build...)

	t.Run("quickstart", func(t *testing.T) {
		out := command(t, programTimeout, app, nil, filepath.Join(bin, "quickstart"))
		const want = "hello, hoplite, hello, hoplite, hello, hoplite\n6 of 8 reduced: [6 12 18]\n"
		if out != want {
			t.Errorf("quickstart printed\n%s\nwant\n%s", out, want)
		}
	})
	t.Run("README's application actor", func(t *testing.T) {
		// An actor in member 2's system Gets what member 0 Puts.
		if out := command(t, programTimeout, app, nil, filepath.Join(bin, "actor")); out != "hello\n" {
			t.Errorf("actor printed %q, want %q", out, "hello\n")
		}
	})
	t.Run("application actors", func(t *testing.T) {
		out := command(t, programTimeout, app, nil, filepath.Join(bin, "broadcast"))
		// Each worker actor Gets the 4 MiB object its trainer actor Put,
		// on its own node, and checks its sha256.
		fetched := regexp.MustCompile(`(?m)^worker on (node-[1-5]) fetched 4194304 bytes, checksum ok$`).FindAllStringSubmatch(out, -1)
		workers := map[string]bool{}
		for _, m := range fetched {
			workers[m[1]] = true
		}
		if len(workers) != 5 || !strings.Contains(out, "all 5 workers have weights-v1;") {
			t.Errorf("want 5 workers on nodes 1-5 to fetch the model, got %d:\n%s", len(workers), out)
		}
	})
	t.Run("hoplite version", func(t *testing.T) {
		out := command(t, programTimeout, app, nil, filepath.Join(bin, "hoplite"), "version")
		// Built in the dependent, Hoplite is one of its dependencies: the
		// version is the required one, replaced by this checkout.
		want := " => " + root + " " + runtime.Version() + "\n"
		if !strings.HasPrefix(out, "hoplite v0.0.0-") || !strings.HasSuffix(out, want) {
			t.Errorf("hoplite version printed %q, want \"hoplite v0.0.0-…%s\"", out, want)
		}
	})
}

// writeDependentModFile writes app's go.mod: a module that requires
// Hoplite at the version a replaced requirement conventionally has, with
// Hoplite's go version (an older one would make Go load the whole
// module graph unpruned, selecting other versions than Hoplite builds
// with), and the hoplite command as a tool (so that tidy keeps the sums
// its build needs, as `go get -tool` does), and requires besides.
func writeDependentModFile(t *testing.T, app, goVersion, root string, requires ...module.Version) {
	t.Helper()
	f := new(modfile.File)
	for _, err := range []error{
		f.AddModuleStmt("example.com/app"),
		f.AddGoStmt(goVersion),
		f.AddRequire(modulePath, "v0.0.0-00010101000000-000000000000"),
		f.AddReplace(modulePath, "", root, ""),
		f.AddTool(modulePath + "/cmd/hoplite"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range requires {
		if err := f.AddRequire(r.Path, r.Version); err != nil {
			t.Fatal(err)
		}
	}
	data, err := f.Format()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "go.mod"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameVersions checks that the dependent builds every module at the
// version Hoplite's go.mod requires: the code Hoplite's tests run.
func sameVersions(t *testing.T, parent, dependent *modfile.File) {
	t.Helper()
	want := map[string]string{}
	for _, r := range parent.Require {
		want[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range dependent.Require {
		if r.Mod.Path == modulePath {
			continue
		}
		switch v, ok := want[r.Mod.Path]; {
		case !ok:
			t.Errorf("the dependent builds %s %s, which Hoplite's go.mod does not require", r.Mod.Path, r.Mod.Version)
		case v != r.Mod.Version:
			t.Errorf("the dependent builds %s %s; Hoplite's go.mod requires %s", r.Mod.Path, r.Mod.Version, v)
		}
	}
}
