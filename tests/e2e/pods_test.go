//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// benchPodEvents are the ADDED events a collector would publish for n Pods of benchPod in one
// namespace of one cluster, status included; uids are distinct per (uidSeries, i), resourceVersions
// count from firstRV.
func benchPodEvents(cluster, ns string, n, uidSeries, firstRV int) []*envelope.Event {
	events := make([]*envelope.Event, n)
	observed := time.Now().UTC()
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i := range events {
		events[i] = benchPodEvent(cluster, ns, i, fmt.Sprintf("00000000-0000-4000-%04d-%012d", uidSeries, i), firstRV+i, created, observed)
	}
	return events
}

// benchPodEvent is the ADDED event of the i-th benchPod of a namespace, status included.
func benchPodEvent(cluster, ns string, i int, uid string, rv int, created, observed time.Time) *envelope.Event {
	pod := benchPod(ns, i)
	obj := map[string]any{}
	raw, _ := json.Marshal(pod)
	_ = json.Unmarshal(raw, &obj)
	obj["apiVersion"], obj["kind"] = "v1", "Pod"
	meta := obj["metadata"].(map[string]any)
	meta["uid"], meta["resourceVersion"], meta["namespace"] = uid, strconv.Itoa(rv), ns
	meta["creationTimestamp"] = created.UTC().Format(time.RFC3339)
	obj["status"] = benchPodStatus(i)
	object, _ := json.Marshal(obj)
	return &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cluster, Version: "v1",
		Resource: "pods", Kind: "Pod", Namespace: ns, Name: pod.Name, UID: uid,
		ResourceVersion: strconv.Itoa(rv), Epoch: 1, ObservedAt: observed, Object: object}
}

// benchPod is a realistic Pod (about 7 KB as a kwok Pod with its status): many labels with dotted
// and slashed keys, a sidecar, env, probes, volumes. The benchmarks create and publish it by the
// thousand.
func benchPod(ns string, i int) *corev1.Pod {
	app := fmt.Sprintf("svc-%03d", i%200)
	var env []corev1.EnvVar
	for k := range 25 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("CONFIG_%s_%02d", strings.ToUpper(strings.ReplaceAll(app, "-", "_")), k),
			Value: fmt.Sprintf("https://%s.%s.svc.cluster.local:8443/api/v1/settings/%02d?region=eu-west-1&tier=gold", app, ns, k)})
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFromInt(8080)}}, PeriodSeconds: 10}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d", app, i),
			Labels: map[string]string{
				"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/version": "1.27.3", "app.kubernetes.io/component": "api", "app.kubernetes.io/part-of": "shop",
				"app.kubernetes.io/managed-by": "helm", "helm.sh/chart": app + "-4.2.1", "pod-template-hash": "7d9f8c6b5",
				"team.example.com/owner": "payments", "security.istio.io/tlsMode": "istio", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
			},
			Annotations: map[string]string{
				"checksum/config":                   "5f0c6e3b2d8a4e1f9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
				"kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z",
				"sidecar.istio.io/status":           `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["workload-socket","credential-socket","workload-certs","istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`,
			},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("kwok-node-%d", i%3+1),
			Containers: []corev1.Container{
				{Name: "api", Image: fmt.Sprintf("registry.example.com/shop/%s:1.27.3", app), Env: env, Resources: res, LivenessProbe: probe, ReadinessProbe: probe,
					Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + app}, {Name: "istio-token", MountPath: "/var/run/secrets/tokens"}}},
				{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.1", Args: []string{"proxy", "sidecar", "--domain", ns + ".svc.cluster.local", "--proxyLogLevel=warning", "--log_output_level=default:info"},
					Resources: res, Ports: []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090}}},
			},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: "istio-token", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func intstrFromInt(v int) intstr.IntOrString { return intstr.FromInt32(int32(v)) }

// benchPodStatus is the status kwok gives a running Pod of benchPod.
func benchPodStatus(i int) map[string]any {
	cond := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "lastTransitionTime": "2026-11-01T10:00:05Z"}
	}
	cs := func(name, image string) map[string]any {
		return map[string]any{"name": name, "image": image, "imageID": "docker-pullable://" + image + "@sha256:4c1e997385b8fb4ad4d1d3c7e5af7ff3f882e94d07cf5b78de9e889bc60830e6",
			"containerID": fmt.Sprintf("containerd://%064d", i), "ready": true, "started": true, "restartCount": i % 3,
			"state": map[string]any{"running": map[string]any{"startedAt": "2026-11-01T10:00:04Z"}}}
	}
	return map[string]any{
		"phase": "Running", "qosClass": "Burstable", "startTime": "2026-11-01T10:00:01Z",
		"hostIP": "10.0.0.1", "hostIPs": []any{map[string]any{"ip": "10.0.0.1"}},
		"podIP": fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1), "podIPs": []any{map[string]any{"ip": fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+1)}},
		"conditions":        []any{cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")},
		"containerStatuses": []any{cs("api", fmt.Sprintf("registry.example.com/shop/svc-%03d:1.27.3", i%200)), cs("istio-proxy", "docker.io/istio/proxyv2:1.24.1")},
	}
}
