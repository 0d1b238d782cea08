package deploy

import (
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// TestImageIsStaticAndUnprivileged checks what `docker build` would do
// and cannot be run here (no Docker engine): the build stage's Go is the
// module's, the binaries are static, the final stage is not the
// toolchain and runs as a numeric non-root user, the health check and
// the entrypoint are binaries the image installs, and .dockerignore
// keeps every source the build needs.
func TestImageIsStaticAndUnprivileged(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindSubmatch(b); m == nil || string(m[1]) != mf.Go.Version {
		t.Errorf("ARG GO_VERSION %q, want go.mod's go %s", m, mf.Go.Version)
	}
	build, final := stages[0], stages[len(stages)-1]
	if env := build.last("ENV"); !strings.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("the build stage's ENV %q: want CGO_ENABLED=0 (a static binary)", env)
	}
	if strings.Contains(final.from, "golang") || final.from == build.from {
		t.Errorf("the final stage is FROM %s: want a minimal base, not the toolchain", final.from)
	}
	img := finalImage(t)
	uid, _, _ := strings.Cut(img.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root user (runAsNonRoot can check only a number)", img.user)
	}
	copies := final.last("COPY")
	for _, bin := range []string{img.entrypoint[0], img.healthcheck[0]} {
		if !strings.Contains(copies, " "+path.Dir(bin)+"/") || !strings.Contains(copies, "/"+path.Base(bin)) {
			t.Errorf("%s is not what the final stage copies (%s)", bin, copies)
		}
	}
	for _, w := range []string{imageHoplite, imageProbe} {
		if w != img.entrypoint[0] && w != img.healthcheck[0] {
			t.Errorf("the tests run %s as the image's, which neither ENTRYPOINT nor HEALTHCHECK names", w)
		}
	}
	for _, f := range []string{"go.mod", "go.sum", "cmd/hoplite/main.go", "internal/liveview/assets/", "third_party/forked/protoactor-go/actor/", "deploy/go.mod", "deploy/cmd/hoplite-probe/main.go"} {
		if p := dockerIgnored(t, f); p != "" {
			t.Errorf(".dockerignore's %q leaves %s out of the build", p, f)
		}
	}
}

// dockerIgnored is the .dockerignore pattern that excludes file (a path
// from the repository root), or "": a pattern matches the path or one of
// the directories above it; a leading **/ matches at any depth.
func dockerIgnored(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSuffix(file, "/"), "/")
	for _, p := range strings.Split(string(b), "\n") {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") {
			t.Fatalf(".dockerignore %q: exceptions are not checked here", p)
		}
		pat := strings.TrimPrefix(p, "/")
		anyDepth := strings.HasPrefix(pat, "**/")
		pat = strings.TrimPrefix(pat, "**/")
		n := len(strings.Split(pat, "/"))
		for start := 0; start+n <= len(parts) && (start == 0 || anyDepth); start++ {
			if ok, _ := path.Match(pat, strings.Join(parts[start:start+n], "/")); ok {
				return p
			}
		}
	}
	return ""
}

// TestImageCommandRuns runs the image's command line (ENTRYPOINT and
// CMD) and its health check against the built binaries: the flags exist,
// the member starts, the health check passes, and SIGTERM stops it
// cleanly. The container's loopback 127.0.0.1 becomes another loopback
// address here, so that the command's fixed ports are free.
func TestImageCommandRuns(t *testing.T) {
	bins := binaries(t)
	img := finalImage(t)
	argv := append(append([]string{}, img.entrypoint...), img.cmd...)
	manage, ok := argValue(argv, "manage-port")
	if !ok {
		t.Fatalf("the image's command %q gives no --manage-port: the health check could not know it", argv)
	}
	var ports []int
	for _, a := range argv {
		for _, m := range regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(a, -1) {
			p, _ := strconv.Atoi(m[1])
			ports = append(ports, p)
		}
	}
	mp, _ := strconv.Atoi(manage)
	host := loopbackHosts(t, 1, append(ports, mp)...)[0]
	for i, a := range argv {
		argv[i] = strings.ReplaceAll(a, "127.0.0.1", host)
	}
	argv[0] = bins[argv[0]]
	n := startNode(t, argv, nil)

	hc := append([]string{}, img.healthcheck...)
	hc[0] = bins[hc[0]]
	// The probe's default URL is the command's manage port on 127.0.0.1
	// (cmd/hoplite-probe checks it); here on the address standing in.
	env := []string{"HOPLITE_PROBE_URL=http://" + host + ":" + manage + "/_health"}
	if out, err := run(t, hc, env); err != nil {
		t.Fatalf("HEALTHCHECK %q: %v\n%s", img.healthcheck, err, out)
	}
	if err := n.stop(t, 10*time.Second); err != nil { // docker stop's default grace
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if out, err := run(t, hc, env); err == nil {
		t.Fatalf("HEALTHCHECK passed with the member stopped:\n%s", out)
	}
}

// argValue is the value of --name in argv, as --name=V or --name V.
func argValue(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(argv) {
			return argv[i+1], true
		}
	}
	return "", false
}
