package moduletest

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// forkDir is where Proto.Actor's patched copy lives in the module: a
// plain directory (no go.mod of its own), so it ships in the module zip.
const forkDir = "third_party/forked/protoactor-go"

// TestModuleZip checks the module zip the proxy would serve for this
// checkout: it carries every file of the checkout but the two nested
// modules' (deploy/ and bench/peers/memberlist/; nothing else is dropped
// as a nested module, vendored or irregular), Proto.Actor's copy with its
// licence among them, and no go.mod but Hoplite's.
func TestModuleZip(t *testing.T) {
	root := moduleRoot(t)
	files := moduleFiles(t, root)
	cf, err := modzip.CheckFiles(files)
	if err != nil {
		t.Fatalf("the checkout makes no valid module zip: %v", err)
	}
	var omitted []modzip.FileError
	for _, o := range cf.Omitted {
		// deploy/ is a module of its own, so that Helm and the
		// Kubernetes libraries its tests use stay out of Hoplite's
		// requirements; so is the memberlist probe, a benchmark peer.
		if !strings.HasPrefix(o.Path, "deploy/") && !strings.HasPrefix(o.Path, "bench/peers/memberlist/") {
			omitted = append(omitted, o)
		}
	}
	for i, o := range omitted {
		if i == 10 {
			t.Errorf("... and %d more", len(omitted)-i)
			break
		}
		t.Errorf("the module zip leaves out %s: %v", o.Path, o.Err)
	}

	const version = "v0.0.0-20261125000000-000000000000"
	names := zipNames(t, moduleZip(t, files, version), version)
	var forkActor int
	for _, n := range names {
		if path.Base(n) == "go.mod" && n != "go.mod" {
			t.Errorf("the module zip holds a nested %s", n)
		}
		if path.Dir(n) == forkDir+"/actor" && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			forkActor++
		}
	}
	if forkActor == 0 {
		t.Errorf("the module zip holds no %s/actor/*.go", forkDir)
	}
	for _, want := range []string{"go.mod", "LICENSE", forkDir + "/LICENSE", forkDir + "/actor/actor_system.go"} {
		if !slices.Contains(names, want) {
			t.Errorf("the module zip lacks %s", want)
		}
	}
}

// moduleFiles lists the checkout's files as a module zip takes them. In
// a git checkout they are the files a commit of the working tree would
// hold — tracked or untracked, less what .gitignore excludes — which is
// what git archive gives the proxy for that commit (CreateFromDir would
// take every file in the directory: built binaries and profiles too).
// Outside git (an unpacked module), every file.
func moduleFiles(t *testing.T, root string) []modzip.File {
	t.Helper()
	var rel []string
	out, err := exec.CommandContext(t.Context(), "git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		for _, p := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			// A tracked file removed from the working tree is not
			// part of it.
			if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
				rel = append(rel, p)
			}
		}
	} else {
		t.Logf("git ls-files: %v; taking every file under %s", err, root)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") { // .git and the like
					return filepath.SkipDir
				}
				return nil
			}
			r, err := filepath.Rel(root, p)
			rel = append(rel, filepath.ToSlash(r))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	files := make([]modzip.File, len(rel))
	for i, p := range rel {
		files[i] = checkoutFile{root: root, path: p}
	}
	return files
}

// checkoutFile is a file of the checkout, as modzip takes it.
type checkoutFile struct {
	root, path string // path is slash-separated, relative to root
}

func (f checkoutFile) Path() string { return f.path }

func (f checkoutFile) Lstat() (os.FileInfo, error) {
	return os.Lstat(filepath.Join(f.root, filepath.FromSlash(f.path)))
}

func (f checkoutFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.path)))
}

// moduleZip is the module zip of files at version.
func moduleZip(t *testing.T, files []modzip.File, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := modzip.Create(&buf, module.Version{Path: modulePath, Version: version}, files); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zipNames are the paths in the module zip z of version, relative to
// the module root.
func zipNames(t *testing.T, z []byte, version string) []string {
	t.Helper()
	r, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	prefix := modulePath + "@" + version + "/"
	var names []string
	for _, f := range r.File {
		n, ok := strings.CutPrefix(f.Name, prefix)
		if !ok {
			t.Fatalf("module zip entry %q is outside %s", f.Name, prefix)
		}
		names = append(names, n)
	}
	return names
}
