package queryapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/table"
)

// benchPod is an event of a typical Pod (about 9 KB of JSON: three containers, an init container,
// a full status), the same as internal/envelope's benchmark Pod, at resourceVersion rv.
func benchPod(b *testing.B, typ envelope.Type, rv string) *envelope.Event {
	b.Helper()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	container := func(name, image string, port int32, env int) corev1.Container {
		c := corev1.Container{
			Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Args:  []string{"--config=/etc/" + name + "/config.yaml", "--log-format=json", "--metrics-port=9090"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
				PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
				InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/" + name, ReadOnly: true},
				{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(true), AllowPrivilegeEscalation: new(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		}
		for i := range env {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("FEATURE_FLAG_%02d", i), Value: "enabled-for-some-tenants"})
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
		return c
	}
	status := func(name, image string, restarts int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: image, ImageID: "registry.example.com/" + name + "@sha256:" + fmt.Sprintf("%064x", len(name)),
			ContainerID: "containerd://" + fmt.Sprintf("%064x", restarts+7), Ready: true, Started: new(true), RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at.Add(-time.Hour))}}}
	}
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "checkout-7d9f8c6b5-x2k4q", GenerateName: "checkout-7d9f8c6b5-", Namespace: "shop",
			UID: "6f1c2a4e-9b3d-4c8e-a1f2-3d4e5f6a7b8c", ResourceVersion: rv, CreationTimestamp: metav1.NewTime(at.Add(-2 * time.Hour)),
			Labels: map[string]string{"app": "checkout", "app.kubernetes.io/name": "checkout", "app.kubernetes.io/part-of": "shop",
				"app.kubernetes.io/version": "2.4.1", "pod-template-hash": "7d9f8c6b5", "topology.kubernetes.io/zone": "eu-west-1a",
				"security.istio.io/tlsMode": "istio"},
			Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "checkout", "prometheus.io/scrape": "true",
				"prometheus.io/port": "9090", "checksum/config": fmt.Sprintf("%064x", 42)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d9f8c6b5",
				UID: "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d", Controller: new(true), BlockOwnerDeletion: new(true)}},
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("migrate", "registry.example.com/shop/checkout-migrate:2.4.1", 8081, 2)},
			Containers: []corev1.Container{
				container("checkout", "registry.example.com/shop/checkout:2.4.1", 8080, 12),
				container("istio-proxy", "docker.io/istio/proxyv2:1.24.2", 15090, 6),
				container("log-shipper", "fluent/fluent-bit:3.2", 2020, 3),
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "checkout-config"}}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			NodeName: "ip-10-0-12-34.eu-west-1.compute.internal", ServiceAccountName: "checkout", RestartPolicy: corev1.RestartPolicyAlways,
			DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler", PriorityClassName: "shop-critical",
			NodeSelector: map[string]string{"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m6i.xlarge"},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.12.34", PodIP: "10.244.3.17", PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}},
			StartTime: new(metav1.NewTime(at.Add(-2 * time.Hour))), QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-2 * time.Hour))},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-time.Hour))},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-time.Hour))},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-2 * time.Hour))},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "migrate", Image: "registry.example.com/shop/checkout-migrate:2.4.1",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
					StartedAt: metav1.NewTime(at.Add(-2 * time.Hour)), FinishedAt: metav1.NewTime(at.Add(-119 * time.Minute))}}}},
			ContainerStatuses: []corev1.ContainerStatus{
				status("checkout", "registry.example.com/shop/checkout:2.4.1", 1),
				status("istio-proxy", "docker.io/istio/proxyv2:1.24.2", 0),
				status("log-shipper", "fluent/fluent-bit:3.2", 0),
			},
		},
	}
	obj, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: "member-eu-1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), ResourceVersion: pod.ResourceVersion,
		Epoch: 1767225600000001, ObservedAt: at, ChangedAt: at.Add(-time.Second), Object: obj}
}

// BenchmarkWatchEvent is what the query API does per watcher for each event of the stream: one
// MODIFIED of a Pod, from the watch cache, matched against the watch's selectors and scope and
// written as the line the client reads. The watch resumed from a resourceVersion, as informers
// do, so the object's previous state is looked up in the window. Views: the fleet view (the
// object's resourceVersion becomes the watch's vector), a one-cluster view (the object as stored),
// and the fleet view as a Table (kubectl get -w).
func BenchmarkWatchEvent(b *testing.B) {
	const cluster = "member-eu-1"
	c := newWatchCache(slog.New(slog.DiscardHandler), 1000, 64<<20)
	c.replaying, c.ready = false, true
	c.apply(benchPod(b, envelope.Added, "184466"))
	c.apply(benchPod(b, envelope.Modified, "184467"))
	e := c.window[len(c.window)-1]
	if e.typ != watch.Modified || e.prevSeq == 0 {
		b.Fatalf("cache event %s with previous %d, want a MODIFIED with its previous state", e.typ, e.prevSeq)
	}
	s := &Server{log: slog.New(slog.DiscardHandler), cache: c}
	res := apiResource{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true}
	q, err := query.Parse(url.Values{
		query.ParamLabelSelector: {"app.kubernetes.io/name=checkout,!canary"},
		query.ParamFieldSelector: {"status.phase=Running"},
	}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	q.Scope = &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"member-us-1"}, Namespaces: []string{"payments"}},
		{Namespaces: []string{"shop", "monitoring"}, Resources: []query.Resource{{Resource: "pods"}}},
	}}
	for _, bc := range []struct {
		name   string
		view   view
		accept string
	}{
		{"fleet", view{}, ""},
		{"cluster", view{cluster: cluster}, ""},
		{"fleet-table", view{}, "application/json;as=Table;g=meta.k8s.io;v=v1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out, st := newRenderer(bc.accept, "", res, bc.view)
			if st != nil {
				b.Fatal(st.Message)
			}
			out.table = table.For(res.Group, res.Resource)
			w := &watcher{s: s, r: &facadeRequest{view: bc.view, path: "/api/v1/pods", version: "v1", resource: "pods"},
				res: res, out: out, q: q, from: rvVector{cluster: 184000}, pos: rvVector{cluster: 184000}}
			for _, cl := range []string{cluster, "member-eu-2", "member-us-1"} {
				w.pairs = append(w.pairs, store.Pair{Cluster: cl, Resource: "pods"})
				if bc.view.vector() {
					w.from[cl], w.pos[cl] = 184000, 184000
				}
			}
			w.event(e)
			if !json.Valid(w.buf.Bytes()) {
				b.Fatalf("watch line is not JSON: %.200s", w.buf.Bytes())
			}
			b.SetBytes(int64(w.buf.Len()))
			b.ReportAllocs()
			for b.Loop() {
				w.buf.Reset()
				w.event(e)
			}
			if w.buf.Len() == 0 {
				b.Fatal("the event was not sent")
			}
		})
	}
}
