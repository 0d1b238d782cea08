package deploy

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// pod runs a rendered pod's containers as processes on this machine, as
// a kubelet would on a node: its IP is a loopback address, its volumes
// are directories, $(VAR) in args and env is expanded from the pod's
// environment and the downward API, and the image's paths are the built
// binaries. Cluster DNS is stood in for by replacing the names in hosts
// with their addresses.
type pod struct {
	t          *testing.T
	name, ip   string
	spec       corev1.PodSpec
	entrypoint []string          // the image's ENTRYPOINT
	bins       map[string]string // image path -> built binary
	hosts      map[string]string // DNS name -> address
	volumes    map[string]string // volume -> directory
}

// newPod lays out spec's volumes; secrets are the Secrets' data by name.
func newPod(t *testing.T, spec corev1.PodSpec, name, ip string, img image, hosts map[string]string, secrets map[string]map[string][]byte) *pod {
	t.Helper()
	p := &pod{t: t, name: name, ip: ip, spec: spec, entrypoint: img.entrypoint, bins: binaries(t), hosts: hosts, volumes: map[string]string{}}
	for _, v := range spec.Volumes {
		dir := t.TempDir()
		p.volumes[v.Name] = dir
		switch {
		case v.EmptyDir != nil:
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: no Secret %s", v.Name, v.Secret.SecretName)
			}
			items := v.Secret.Items
			if len(items) == 0 {
				for k := range data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				b, ok := data[it.Key]
				if !ok {
					t.Fatalf("volume %s: Secret %s has no key %s", v.Name, v.Secret.SecretName, it.Key)
				}
				if err := os.WriteFile(filepath.Join(dir, it.Path), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("volume %s: a kind the test does not lay out", v.Name)
		}
	}
	return p
}

// mount makes c's subPath mounts (files inside another mount) and
// returns what removes them, leaving the empty files the kubelet leaves
// where it mounted them.
func (p *pod) mount(c corev1.Container) func() {
	var made []string
	for _, m := range c.VolumeMounts {
		if m.SubPath == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.volumes[m.Name], m.SubPath))
		if err != nil {
			p.t.Fatal(err)
		}
		dst := p.path(c, m.MountPath)
		if dst == m.MountPath {
			p.t.Fatalf("subPath mount %s is not inside another mount of %s", m.MountPath, c.Name)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			p.t.Fatal(err)
		}
		made = append(made, dst)
	}
	return func() {
		for _, f := range made {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

// path maps the container's paths in s (its mounts, the image's
// binaries) to this machine's.
func (p *pod) path(c corev1.Container, s string) string {
	var pairs [][2]string
	for _, m := range c.VolumeMounts {
		if m.SubPath == "" {
			pairs = append(pairs, [2]string{m.MountPath, p.volumes[m.Name]})
		}
	}
	for from, to := range p.bins {
		pairs = append(pairs, [2]string{from, to})
	}
	// Longest first: /usr/local/bin/hoplite-probe before .../hoplite.
	slices.SortFunc(pairs, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	var flat []string
	for _, pr := range pairs {
		flat = append(flat, pr[0], pr[1])
	}
	// One pass: a path replaced is not matched again (/tmp in a
	// binary's path on this machine is not the container's /tmp).
	return strings.NewReplacer(flat...).Replace(s)
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// env is c's environment, in order, as the kubelet makes it.
func (p *pod) env(c corev1.Container) ([]string, map[string]string) {
	vars := map[string]string{}
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			if f.FieldRef == nil {
				p.t.Fatalf("env %s: only the downward API's fields are laid out", e.Name)
			}
			switch f.FieldRef.FieldPath {
			case "metadata.name":
				v = p.name
			case "metadata.namespace":
				v = namespace
			case "status.podIP":
				v = p.ip
			default:
				p.t.Fatalf("env %s: field %s", e.Name, f.FieldRef.FieldPath)
			}
		}
		v = p.path(c, p.expand(v, vars))
		vars[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, vars
}

// expand replaces $(VAR) for the variables defined, as Kubernetes does
// (an undefined one stays as written), then DNS names with addresses.
func (p *pod) expand(s string, vars map[string]string) string {
	s = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
	names := slices.Collect(maps.Keys(p.hosts))
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, n := range names {
		pairs = append(pairs, n, p.hosts[n])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// argv is c's command line: its command or the image's entrypoint, then
// its args, expanded.
func (p *pod) argv(c corev1.Container, vars map[string]string) []string {
	cmd := c.Command
	if len(cmd) == 0 {
		cmd = p.entrypoint
	}
	var argv []string
	for _, a := range append(slices.Clone(cmd), c.Args...) {
		argv = append(argv, p.path(c, p.expand(a, vars)))
	}
	if _, err := os.Stat(argv[0]); err != nil {
		p.t.Fatalf("container %s runs %s, which the image does not have", c.Name, argv[0])
	}
	return argv
}

// init runs the pod's init containers to their end.
func (p *pod) init() {
	for _, c := range p.spec.InitContainers {
		unmount := p.mount(c)
		env, vars := p.env(c)
		if out, err := run(p.t, p.argv(c, vars), env); err != nil {
			p.t.Fatalf("pod %s: init container %s: %v\n%s", p.name, c.Name, err, out)
		}
		unmount()
	}
}

// start starts the pod's one container.
func (p *pod) start() *node {
	if len(p.spec.Containers) != 1 {
		p.t.Fatalf("%d containers, want the member's", len(p.spec.Containers))
	}
	c := p.spec.Containers[0]
	p.mount(c)
	env, vars := p.env(c)
	return startNode(p.t, p.argv(c, vars), env)
}

// probe runs one of the container's probes once and returns its
// failure.
func (p *pod) probe(pr *corev1.Probe) error {
	c := p.spec.Containers[0]
	env, vars := p.env(c)
	switch {
	case pr.Exec != nil:
		var argv []string
		for _, a := range pr.Exec.Command {
			argv = append(argv, p.path(c, a)) // exec probes expand no $(VAR)
		}
		if out, err := run(p.t, argv, env); err != nil {
			return fmt.Errorf("exec %q: %v: %s", pr.Exec.Command, err, out)
		}
		return nil
	case pr.HTTPGet != nil:
		port := pr.HTTPGet.Port.String()
		for _, cp := range c.Ports {
			if cp.Name == port {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
		if pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != corev1.URISchemeHTTP {
			return fmt.Errorf("httpGet scheme %s: the kubelet shows no client certificate", pr.HTTPGet.Scheme)
		}
		ctx, cancel := context.WithTimeout(p.t.Context(), time.Duration(max(pr.TimeoutSeconds, 1))*time.Second)
		defer cancel()
		url := "http://" + p.ip + ":" + port + p.expand(pr.HTTPGet.Path, vars)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		// The kubelet takes 200-399 as success.
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
	return fmt.Errorf("probe %+v: a handler the test does not run", pr.ProbeHandler)
}
