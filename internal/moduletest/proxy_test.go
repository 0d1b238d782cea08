package moduletest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
)

// TestProxyInstall serves this checkout from a module proxy (a file://
// GOPROXY in front of the usual one, which still serves the
// dependencies) and installs the hoplite command as a user does:
// go install github.com/hoplite-go/hoplite/cmd/hoplite@version. The
// installed command names the version it was built from.
func TestProxyInstall(t *testing.T) {
	root := moduleRoot(t)
	version := uniquePseudoVersion(t)
	proxy := t.TempDir()
	serveModule(t, proxy, version, moduleZip(t, moduleFiles(t, root), version),
		filepath.Join(root, "go.mod"))
	modcache := goEnv(t, "GOMODCACHE")
	t.Cleanup(func() { forgetModule(t, modcache, version) })

	gobin := t.TempDir()
	env := []string{
		"GOPROXY=file://" + filepath.ToSlash(proxy) + "," + goEnv(t, "GOPROXY"),
		// The checksum database does not know this version; every other
		// module is checked as usual.
		"GONOSUMDB=" + strings.Trim(goEnv(t, "GONOSUMDB")+","+modulePath, ","),
		// -modcacherw: forgetModule can remove what was extracted. (Not
		// the caller's GOFLAGS: go install pkg@version refuses -mod.)
		"GOFLAGS=-modcacherw",
		"GOBIN=" + gobin,
	}
	install := append(append([]string{"install"}, raceFlag...), modulePath+"/cmd/hoplite@"+version)
	goCommand(t, t.TempDir(), env, install...)

	out := command(t, programTimeout, gobin, nil, filepath.Join(gobin, "hoplite"), "version")
	if f := strings.Fields(out); len(f) < 2 || f[0] != "hoplite" || f[1] != version {
		t.Errorf("the installed hoplite version printed %q, want \"hoplite %s ...\"", out, version)
	}
}

// uniquePseudoVersion is a pseudo-version no earlier run used: the module
// cache keeps a version's files once extracted, so reusing one would
// install what an earlier run served.
func uniquePseudoVersion(t *testing.T) string {
	t.Helper()
	rev := make([]byte, 6)
	if _, err := rand.Read(rev); err != nil {
		t.Fatal(err)
	}
	return "v0.0.0-" + time.Now().UTC().Format("20060102150405") + "-" + hex.EncodeToString(rev)
}

// serveModule lays out Hoplite at version in the file proxy rooted at
// proxy: @v/list, .info, .mod and .zip, as the GOPROXY protocol has them.
func serveModule(t *testing.T, proxy, version string, zip []byte, goMod string) {
	t.Helper()
	escaped, err := module.EscapePath(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": info,
		version + ".mod":  mod,
		version + ".zip":  zip,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// forgetModule removes Hoplite at version from the module cache: the
// extracted tree, the downloaded files and its line in the version list
// (each run adds one version, which nothing else ever uses), then the
// directories that leaves empty.
func forgetModule(t *testing.T, modcache, version string) {
	t.Helper()
	escaped, err := module.EscapePath(modulePath)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	extracted := filepath.Join(modcache, filepath.FromSlash(escaped)+"@"+ev)
	if err := os.RemoveAll(extracted); err != nil {
		t.Error(err)
	}
	dl := filepath.Join(modcache, "cache", "download", filepath.FromSlash(escaped), "@v")
	files, err := filepath.Glob(filepath.Join(dl, ev+".*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Error(err)
		}
	}
	list := filepath.Join(dl, "list")
	if data, err := os.ReadFile(list); err == nil {
		var kept []string
		for _, v := range strings.Fields(string(data)) {
			if v != version {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			err = os.Remove(list)
		} else {
			err = os.WriteFile(list, []byte(strings.Join(kept, "\n")+"\n"), 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
	// Up to the cache's own directories; a directory still in use is
	// not empty, and stays.
	for _, d := range []string{dl, filepath.Dir(dl), filepath.Dir(filepath.Dir(dl)), filepath.Dir(extracted)} {
		_ = os.Remove(d)
	}
}
