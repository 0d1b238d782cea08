package deploy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// leaveBound is how long `hoplite node` waits for its graceful leave
// after SIGTERM (runMember in cmd/hoplite/node.go).
const leaveBound = 15

// manifests renders vals and validates every document, failing the test
// on any error; it returns the typed objects.
func manifests(t *testing.T, vals map[string]any) []runtime.Object {
	t.Helper()
	v := newValidator(t)
	var objs []runtime.Object
	for _, doc := range mustRender(t, vals) {
		obj, err := v.validate(doc)
		if err != nil {
			t.Fatalf("invalid manifest: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func kinds(objs []runtime.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetObjectKind().GroupVersionKind().Kind)
	}
	slices.Sort(ks)
	return ks
}

func statefulSet(t *testing.T, objs []runtime.Object) *appsv1.StatefulSet {
	t.Helper()
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			return s
		}
	}
	t.Fatal("no StatefulSet rendered")
	return nil
}

func services(objs []runtime.Object) map[string]*corev1.Service {
	out := map[string]*corev1.Service{}
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok {
			out[s.Name] = s
		}
	}
	return out
}

// flag is the value of --name=value in args ("" and false if absent).
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "", true
		}
	}
	return "", false
}

func TestChartManifestsValidate(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		kinds        []string
	}{
		{"plaintext", "insecure: true", []string{"PodDisruptionBudget", "Service", "Service", "StatefulSet"}},
		{"tls and a ServiceMonitor", `
tls: {secretName: hoplite-ca}
serviceMonitor: {enabled: true, clientSecretName: prometheus-client, labels: {release: prometheus}}`,
			[]string{"PodDisruptionBudget", "Service", "Service", "ServiceMonitor", "StatefulSet"}},
		{"etcd over tls", `
provider: etcd
etcd: {endpoint: "etcd.store.svc.cluster.local:2379", tlsSecretName: etcd-client}
tls: {secretName: hoplite-ca}`, []string{"PodDisruptionBudget", "Service", "Service", "StatefulSet"}},
		{"one member with everything else changed", `
replicas: 1
insecure: true
podDisruptionBudget: {enabled: false}
preStopSleepSeconds: 0
extraArgs: [--link-rate=10gbit, --pages=small]
cpu: {request: "2", limit: "4"}
image: {repository: registry.example/hoplite, tag: v1.2.3}
imagePullSecrets: [{name: registry}]
nodeSelector: {kubernetes.io/arch: amd64}
tolerations: [{key: dedicated, operator: Equal, value: hoplite, effect: NoSchedule}]
podAnnotations: {example.com/note: hi}
serviceMonitor: {enabled: true}`, []string{"Service", "Service", "ServiceMonitor", "StatefulSet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := manifests(t, values(t, tc.values))
			if got := kinds(objs); !slices.Equal(got, tc.kinds) {
				t.Errorf("kinds %v, want %v", got, tc.kinds)
			}
		})
	}
}

// TestChartRefusesValuesThatCannotWork: a member refuses plaintext beyond
// its pod, so the chart says so when it renders rather than when pods
// crash.
func TestChartRefusesValuesThatCannotWork(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"{}", "set tls.secretName"},
		{"{insecure: false, tls: {secretName: ''}}", "or insecure=true"},
		{"{insecure: true, provider: consul}", "/provider"},
		{"{insecure: true, provider: etcd}", "needs etcd.endpoint"},
		{"{tls: {secretName: ca}, provider: etcd, etcd: {endpoint: 'etcd:2379'}}", "set etcd.tlsSecretName"},
		{"{tls: {secretName: ca}, serviceMonitor: {enabled: true}}", "serviceMonitor.clientSecretName"},
		{"{insecure: true, capacityMiB: 0}", "capacityMiB"},
		{"{insecure: true, capacity: 4GiB}", "capacity"},
		{"{insecure: true, capacityMiB: 4GiB}", "capacityMiB"},
		{"{insecure: true, tls: {secret: ca}}", "secret"},
		{"{insecure: true, terminationGracePeriodSeconds: 10}", "graceful leave"},
	} {
		_, err := render(t, values(t, tc.values))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: error %v, want one saying %q", tc.values, err, tc.want)
		}
	}
}

// TestChartLints: `helm lint` finds nothing to warn of.
func TestChartLints(t *testing.T) {
	for _, vals := range []string{"insecure: true", "tls: {secretName: ca}", "{insecure: true, provider: etcd, etcd: {endpoint: 'etcd:2379'}}"} {
		res := action.NewLint().Run([]string{chartDir}, values(t, vals))
		for _, err := range res.Errors {
			t.Errorf("values %s: %v", vals, err)
		}
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("values %s: %s", vals, m.Error())
			}
		}
	}
}

// TestValidatorRefusesWhatTheAPIRefuses: the validation is not vacuous.
func TestValidatorRefusesWhatTheAPIRefuses(t *testing.T) {
	var sts string
	for _, d := range mustRender(t, values(t, "insecure: true")) {
		if strings.Contains(d, "kind: StatefulSet") {
			sts = d
		}
	}
	v := newValidator(t)
	if _, err := v.validate(sts); err != nil {
		t.Fatalf("the rendered StatefulSet: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"unknown field", "  podManagementPolicy: Parallel", "  podManagementPolicy: Parallel\n  replica: 3"},
		{"wrong type", "  replicas: 3", "  replicas: three"},
		{"misspelt field in the pod", "      terminationGracePeriodSeconds:", "      terminationGracePeriod:"},
		{"duplicate environment variable", "            - name: POD_IP\n", "            - name: POD_IP\n              value: x\n            - name: POD_IP\n"},
		{"unknown kind", "kind: StatefulSet", "kind: StatefulSets"},
		{"unknown apiVersion", "apiVersion: apps/v1", "apiVersion: apps/v2"},
	} {
		bad := strings.Replace(sts, tc.from, tc.to, 1)
		if bad == sts {
			t.Fatalf("%s: %q is not in the rendered StatefulSet", tc.name, tc.from)
		}
		if _, err := v.validate(bad); err == nil {
			t.Errorf("%s: validated", tc.name)
		}
	}
}

// TestSeedsAreThePodsOfTheHeadlessService: every member's --seeds names
// the manage ports of the first pods by their DNS names in the headless
// Service, which publishes them before the pods are ready.
func TestSeedsAreThePodsOfTheHeadlessService(t *testing.T) {
	objs := manifests(t, values(t, "{insecure: true, replicas: 5}"))
	sts := statefulSet(t, objs)
	headless := services(objs)[sts.Spec.ServiceName]
	if headless == nil {
		t.Fatalf("no Service %q (the StatefulSet's serviceName)", sts.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want None and true", headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	if !reflect.DeepEqual(headless.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("Service selector %v, pod labels %v", headless.Spec.Selector, sts.Spec.Template.Labels)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	manage, ok := flag(c.Args, "manage-port")
	if !ok {
		t.Fatalf("no --manage-port in %q", c.Args)
	}
	seeds, _ := flag(c.Args, "seeds")
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:%s", sts.Name, i, headless.Name, namespace, manage))
	}
	if seeds != strings.Join(want, ",") {
		t.Errorf("--seeds=%s, want %s", seeds, strings.Join(want, ","))
	}
	if bind, _ := flag(c.Args, "bind"); bind != "$(POD_IP):7000" {
		t.Errorf("--bind=%s, want the pod's IP", bind)
	}
	// Scaling up past the seeds leaves the pods as they are.
	three := statefulSet(t, manifests(t, values(t, "{insecure: true, replicas: 3}")))
	if !reflect.DeepEqual(three.Spec.Template, sts.Spec.Template) {
		t.Error("the pod template of 3 replicas differs from that of 5: scaling would restart every member")
	}
}

func TestResourcesFollowCapacity(t *testing.T) {
	sts := statefulSet(t, manifests(t, values(t, "{insecure: true, capacityMiB: 4096, memoryOverheadMiB: 600}")))
	c := sts.Spec.Template.Spec.Containers[0]
	if capacity, _ := flag(c.Args, "capacity"); capacity != "4096MiB" {
		t.Errorf("--capacity=%s, want 4096MiB", capacity)
	}
	want := resource.MustParse("4696Mi")
	for what, q := range map[string]resource.Quantity{"request": c.Resources.Requests[corev1.ResourceMemory], "limit": c.Resources.Limits[corev1.ResourceMemory]} {
		if q.Cmp(want) != 0 {
			t.Errorf("memory %s %s, want %s (capacity and overhead)", what, q.String(), want.String())
		}
	}
	var gomemlimit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			gomemlimit = e.Value
		}
	}
	if gomemlimit != "4226MiB" {
		t.Errorf("GOMEMLIMIT %q, want 4226MiB (nine tenths of the limit)", gomemlimit)
	}
}

// TestProbesAndLeave: the probes GET the manage port's /_health (with
// the member's certificate under TLS; /metrics with etcd, which serves
// no /_health), and a pod is given the time to leave gracefully.
func TestProbesAndLeave(t *testing.T) {
	for _, tc := range []struct {
		name, values, path string
		exec               bool
	}{
		{"plaintext", "insecure: true", "/_health", false},
		{"tls", "tls: {secretName: ca}", "/_health", true},
		{"etcd", "{insecure: true, provider: etcd, etcd: {endpoint: 'etcd:2379'}}", "/metrics", false},
		{"etcd over tls", "{tls: {secretName: ca}, provider: etcd, etcd: {endpoint: 'etcd:2379', tlsSecretName: e}}", "/metrics", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := statefulSet(t, manifests(t, values(t, tc.values))).Spec.Template.Spec
			c := pod.Containers[0]
			for what, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				switch {
				case p == nil:
					t.Errorf("no %s probe", what)
				case tc.exec:
					if p.Exec == nil || !slices.Equal(p.Exec.Command, []string{"/usr/local/bin/hoplite-probe"}) {
						t.Errorf("%s probe %+v, want an exec of hoplite-probe", what, p.ProbeHandler)
					}
					env := map[string]string{}
					for _, e := range c.Env {
						env[e.Name] = e.Value
					}
					if u := env["HOPLITE_PROBE_URL"]; u != "https://$(POD_IP):8000"+tc.path {
						t.Errorf("HOPLITE_PROBE_URL %q, want the manage port's %s over TLS", u, tc.path)
					}
				default:
					if p.HTTPGet == nil || p.HTTPGet.Path != tc.path || p.HTTPGet.Port.String() != "manage" {
						t.Errorf("%s probe %+v, want GET %s on port manage", what, p.ProbeHandler, tc.path)
					}
				}
			}
			sleep := int64(0)
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
				t.Error("no preStop sleep")
			} else {
				sleep = c.Lifecycle.PreStop.Sleep.Seconds
			}
			if g := pod.TerminationGracePeriodSeconds; g == nil || *g < sleep+leaveBound {
				t.Errorf("terminationGracePeriodSeconds %v: want at least the preStop's %d s and the leave's %d s", g, sleep, leaveBound)
			}
		})
	}
}

func TestServiceMonitorScrapesTheClientService(t *testing.T) {
	objs := manifests(t, values(t, "{tls: {secretName: ca}, serviceMonitor: {enabled: true, clientSecretName: prom}}"))
	var sm *monitoringv1.ServiceMonitor
	for _, o := range objs {
		if s, ok := o.(*monitoringv1.ServiceMonitor); ok {
			sm = s
		}
	}
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	var matched []string
	for name, s := range services(objs) {
		ok := true
		for k, v := range sm.Spec.Selector.MatchLabels {
			ok = ok && s.Labels[k] == v
		}
		if ok {
			matched = append(matched, name)
			if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == sm.Spec.Endpoints[0].Port }) {
				t.Errorf("Service %s has no port %q", name, sm.Spec.Endpoints[0].Port)
			}
		}
	}
	// One Service, or Prometheus scrapes each member twice.
	if len(matched) != 1 {
		t.Errorf("the ServiceMonitor selects Services %v, want one", matched)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Path != "/metrics" || ep.Scheme == nil || *ep.Scheme != "https" || ep.TLSConfig == nil || ep.TLSConfig.Cert.Secret == nil {
		t.Errorf("endpoint %+v: want /metrics over https with a client certificate", ep)
	}
}
