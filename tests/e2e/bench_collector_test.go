//go:build e2e && bench

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchCollectorList measures the collector listing BENCH_PODS (10,000) Pods of realistic size
// from one test bed member: publish rate and the collector's peak resident memory, also as a multiple
// of the pruned JSON it published. It reports figures; it asserts only that every Pod was published.
// Run it with `make bench-collector`.
func TestBenchCollectorList(t *testing.T) {
	buildFlags = nil // measure the binary users run, not a race-detector build
	env := testbed.Get(t)
	n := 10000
	if v := os.Getenv("BENCH_PODS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	cluster := env.Clusters[0]
	// No owner references: the garbage collector would delete Pods whose owner does not exist.
	ns := "bench-pods-2"
	cfg := env.RESTConfig(t, cluster)
	cfg.QPS, cfg.Burst = 1000, 2000
	cs := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, cs, ns)
	have, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if missing := n - len(have.Items); missing > 0 {
		start := time.Now()
		createPods(t, cs, ns, len(have.Items), missing)
		t.Logf("created %d pods in %s", missing, time.Since(start).Round(time.Second))
	}

	dir := t.TempDir()
	writeFile(t, dir+"/pods.yaml", fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: bench}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors:
  - {apiVersion: v1, kind: Pod, namespace: %s}
`, cluster, ns))
	topic := uniqueName("bench-collector")
	log := tailTopic(t, env.KafkaBrokers, topic)
	start := time.Now()
	pageSize := "100"
	if v := os.Getenv("BENCH_PAGE_SIZE"); v != "" {
		pageSize = v
	}
	p, _ := startCollector(t, env, dir, topic, "--page-size", pageSize)
	evs := log.waitFor(t, "the SYNC of the list", 10*time.Minute, func(evs []*envelope.Event) bool {
		for _, ev := range evs {
			if ev.Type == envelope.Sync {
				return true
			}
		}
		return false
	})
	elapsed := time.Since(start)
	peak := peakRSS(t, p.cmd.Process.Pid)
	var objects, bytes, msgBytes int
	var sync *envelope.Event
	for _, ev := range evs {
		switch ev.Type {
		case envelope.Added:
			objects++
			bytes += len(ev.Object)
			b, _ := ev.Marshal()
			msgBytes += len(b)
		case envelope.Sync:
			sync = ev
		}
	}
	if sync.Count == nil || *sync.Count < n || objects < n {
		t.Fatalf("published %d objects, SYNC counts %v, want %d", objects, sync.Count, n)
	}
	mb := float64(msgBytes) / (1 << 20)
	t.Logf("listed and published %d pods (pruned JSON %.1f MiB, %.1f KB average; %.1f MiB of envelopes) in %s",
		objects, float64(bytes)/(1<<20), float64(bytes)/float64(objects)/1000, mb, elapsed.Round(time.Millisecond))
	t.Logf("rate: %.0f objects/s, %.1f MB/s of envelopes (start of process to SYNC read back from Kafka)",
		float64(objects)/elapsed.Seconds(), float64(msgBytes)/1e6/elapsed.Seconds())
	t.Logf("collector peak RSS (VmHWM): %.1f MiB = %.1f MiB per 10k objects = %.2f× the pruned JSON",
		float64(peak)/(1<<20), float64(peak)/(1<<20)*10000/float64(objects), float64(peak)/float64(bytes))
}

// peakRSS reads VmHWM, the process's peak resident set, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// createPods creates count Pods shaped like a real workload's: a dozen labels with
// dotted keys, sidecar-injection annotations, two containers with env, probes, resources and mounts —
// about 10 KB of JSON before kwok adds status.
func createPods(t *testing.T, cs kubernetes.Interface, ns string, from, count int) {
	t.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), benchPod(ns, i), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := from; i < from+count; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("create pods: %v", err)
	default:
	}
}

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
