package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The chart's ports (values.yaml), kept: each pod has an address of
// its own.
var chartPorts = []int{7000, 7100, 8000}

// podHosts maps the DNS names of n pods of sts in the headless Service
// to addresses standing in for their IPs.
func podHosts(t *testing.T, stsName, service string, n int) ([]string, map[string]string) {
	t.Helper()
	ips := loopbackHosts(t, n, chartPorts...)
	hosts := map[string]string{}
	for i, ip := range ips {
		hosts[fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", stsName, i, service, namespace)] = ip
	}
	return ips, hosts
}

// TestChartPodsRunWithTLS runs two pods of the chart with TLS from a
// Secret holding a CA that `hoplite certs` made: each pod's init
// container signs its certificate, the member joins through the seeds
// (the second sees the first), every probe passes with the member's own
// certificate, and SIGTERM makes a member leave within the pod's grace
// period.
func TestChartPodsRunWithTLS(t *testing.T) {
	bins := binaries(t)
	caDir := t.TempDir()
	if out, err := run(t, []string{bins[imageHoplite], "certs", "--dir", caDir, "--hosts", "127.0.0.1"}, nil); err != nil {
		t.Fatalf("hoplite certs: %v\n%s", err, out)
	}
	// kubectl create secret generic hoplite-ca --from-file=ca.pem --from-file=ca-key.pem
	secret := map[string][]byte{}
	for _, f := range []string{"ca.pem", "ca-key.pem"} {
		b, err := os.ReadFile(filepath.Join(caDir, f))
		if err != nil {
			t.Fatal(err)
		}
		secret[f] = b
	}
	sts := statefulSet(t, manifests(t, values(t, "{replicas: 2, tls: {secretName: hoplite-ca}}")))
	spec := sts.Spec.Template.Spec
	ips, hosts := podHosts(t, sts.Name, sts.Spec.ServiceName, 2)
	img := finalImage(t)

	var pods []*pod
	var nodes []*node
	for i, ip := range ips {
		p := newPod(t, spec, fmt.Sprintf("%s-%d", sts.Name, i), ip, img, hosts, map[string]map[string][]byte{"hoplite-ca": secret})
		p.init()
		// The CA's key stays in the init container.
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				key := filepath.Join(p.path(c, m.MountPath), "ca-key.pem")
				if b, err := os.ReadFile(key); err == nil && len(b) > 0 {
					t.Errorf("container %s can read the CA's key at %s", c.Name, filepath.Join(m.MountPath, "ca-key.pem"))
				}
			}
		}
		// One after the other, so that the second's start line shows
		// that it found the first through the seeds.
		n := p.start()
		if n.members != i+1 {
			t.Errorf("pod %d joined with %d members, want %d", i, n.members, i+1)
		}
		pods, nodes = append(pods, p), append(nodes, n)
	}
	c := spec.Containers[0]
	for i, p := range pods {
		for what, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if err := p.probe(pr); err != nil {
				t.Errorf("pod %d: %s probe: %v", i, what, err)
			}
		}
	}
	// A probe without the member's certificate is refused: the exec
	// probe is not passing for want of checking anything.
	bare := *c.ReadinessProbe
	if bare.Exec != nil {
		bare.Exec = &corev1.ExecAction{Command: append(bare.Exec.Command, "--cert=", "--key=")}
		if err := pods[0].probe(&bare); err == nil {
			t.Error("the probe passed without a client certificate")
		}
	}

	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		grace -= time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if err := nodes[1].stop(t, grace); err != nil {
		t.Fatalf("pod 1 after SIGTERM: %v", err)
	}
	if out := nodes[1].stdout.String(); !strings.Contains(out, "left the cluster") {
		t.Errorf("pod 1 did not say it left the cluster:\n%s", out)
	}
	if err := pods[0].probe(c.LivenessProbe); err != nil {
		t.Errorf("pod 0 after pod 1 left: %v", err)
	}
}

// TestChartPodRunsInPlaintext runs one pod with insecure=true: the
// kubelet's own GET probes pass.
func TestChartPodRunsInPlaintext(t *testing.T) {
	sts := statefulSet(t, manifests(t, values(t, "{replicas: 1, insecure: true}")))
	spec := sts.Spec.Template.Spec
	ips, hosts := podHosts(t, sts.Name, sts.Spec.ServiceName, 1)
	p := newPod(t, spec, sts.Name+"-0", ips[0], finalImage(t), hosts, nil)
	p.init()
	n := p.start()
	c := spec.Containers[0]
	for what, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr.HTTPGet == nil {
			t.Errorf("%s probe: want the kubelet's GET without TLS", what)
		}
		if err := p.probe(pr); err != nil {
			t.Errorf("%s probe: %v", what, err)
		}
	}
	if err := n.stop(t, time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}
