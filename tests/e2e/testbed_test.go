//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/segmentio/kafka-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// Every member serves create, list and watch to client-go, and each member has its own
// resourceVersion sequence (one etcd each).
func TestTestbedMembersServeClientGo(t *testing.T) {
	env := testbed.Get(t)
	if len(env.Clusters) < 3 {
		t.Fatalf("want at least 3 member clusters, have %v", env.Clusters)
	}
	ns := uniqueName("smoke")
	rvs := map[string]string{}
	for _, cluster := range env.Clusters {
		t.Run(cluster, func(t *testing.T) {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
			ctx := t.Context()
			createNamespace(t, cs, ns)
			// The controller-manager adds kube-root-ca.crt to every namespace; watch only ours.
			w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=app-config"})
			if err != nil {
				t.Fatalf("watch configmaps: %v", err)
			}
			defer w.Stop()
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "app-config", Labels: map[string]string{"app.kubernetes.io/name": "smoke"}},
				Data:       map[string]string{"cluster": cluster},
			}
			created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create configmap: %v", err)
			}
			select {
			case ev := <-w.ResultChan():
				got, ok := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Added || !ok || got.UID != created.UID {
					t.Fatalf("watch: got %s %T, want ADDED of uid %s", ev.Type, ev.Object, created.UID)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("watch: no event within 30s")
			}
			list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=smoke"})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if len(list.Items) != 1 || list.Items[0].Data["cluster"] != cluster {
				t.Fatalf("list: got %d items %+v, want the one just created", len(list.Items), list.Items)
			}
			rvs[cluster] = created.ResourceVersion
		})
	}
	t.Cleanup(func() {
		for _, cluster := range env.Clusters {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	t.Logf("resourceVersions of the same create per member: %v", rvs)
}

// The same Deployment rolled out to every member reaches its ready replicas on kwok's fake nodes: the
// controller-manager, scheduler and kwok all work, and Pods get node names and IPs.
func TestTestbedDeploymentBecomesReady(t *testing.T) {
	env := testbed.Get(t)
	ns := uniqueName("deploy")
	const replicas = 3
	for _, cluster := range env.Clusters {
		t.Run(cluster, func(t *testing.T) {
			t.Parallel()
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
			ctx := t.Context()
			createNamespace(t, cs, ns)
			t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
			labels := map[string]string{"app.kubernetes.io/name": "web", "app": "web"}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr(int32(replicas)),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27"}},
							// kwok's nodes carry no taints, but real fleets tolerate kwok's by habit.
							Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
						},
					},
				},
			}
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create deployment: %v", err)
			}
			err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				return got.Status.ReadyReplicas == replicas, nil
			})
			if err != nil {
				t.Fatalf("deployment never reached %d ready replicas: %v", replicas, err)
			}
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				t.Fatalf("list pods: %v", err)
			}
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" || p.Status.PodIP == "" || len(p.Status.ContainerStatuses) != 1 {
					t.Errorf("pod %s: phase %s node %q ip %q containerStatuses %d; want Running on a node with an IP",
						p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP, len(p.Status.ContainerStatuses))
				}
			}
		})
	}
}

// A 1.4 MiB message (the size of the largest Kubernetes objects) goes through the broker, and a
// consumer group's committed offset is where a new member of the group resumes.
func TestTestbedKafkaLargeMessageAndConsumerGroup(t *testing.T) {
	env := testbed.Get(t)
	ctx := t.Context()
	topic := uniqueName("smoke")
	conn, err := kafka.DialContext(ctx, "tcp", env.KafkaBrokers[0])
	if err != nil {
		t.Fatalf("dial kafka: %v", err)
	}
	defer conn.Close()
	controller, err := conn.Controller()
	if err != nil {
		t.Fatalf("kafka controller: %v", err)
	}
	cc, err := kafka.DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", controller.Host, controller.Port))
	if err != nil {
		t.Fatalf("dial controller: %v", err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	waitTopicReady(t, env.KafkaBrokers, topic, 3)

	big := make([]byte, 1400*1024)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{
		Addr: kafka.TCP(env.KafkaBrokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchBytes: 4 << 20,
		// kafka-go's shared default transport caches topic metadata for seconds; the topic is new.
		Transport: &kafka.Transport{},
	}
	defer w.Close()
	msgs := []kafka.Message{{Key: []byte("member1/apps/deployments"), Value: big}}
	for i := range 4 {
		msgs = append(msgs, kafka.Message{Key: []byte("member1/apps/deployments"), Value: []byte(fmt.Sprintf("small-%d", i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}

	group := uniqueName("group")
	read := func(n int) []kafka.Message {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: env.KafkaBrokers, GroupID: group, Topic: topic, MaxBytes: 4 << 20,
			StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
		})
		defer r.Close()
		var got []kafka.Message
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for range n {
			m, err := r.FetchMessage(rctx)
			if err != nil {
				t.Fatalf("fetch: %v (after %d messages)", err, len(got))
			}
			if err := r.CommitMessages(rctx, m); err != nil {
				t.Fatalf("commit: %v", err)
			}
			got = append(got, m)
		}
		return got
	}
	first := read(2)
	if !bytes.Equal(first[0].Value, big) {
		t.Fatalf("first message: %d bytes, want the 1.4 MiB payload intact", len(first[0].Value))
	}
	// Same key → same partition → total order; a second group member resumes after the commit.
	rest := read(3)
	for i, m := range rest {
		if want := fmt.Sprintf("small-%d", i+1); string(m.Value) != want {
			t.Fatalf("after commit: message %d is %q, want %q", i, m.Value, want)
		}
	}
}

// The OpenSearch Go client can do everything the indexer and query API rely on: a flat_object mapping,
// _bulk with external_gte versions, a point-in-time search paged with search_after, delete-by-query.
func TestTestbedOpenSearch(t *testing.T) {
	env := testbed.Get(t)
	ctx := t.Context()
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{env.OpenSearchURL}}})
	if err != nil {
		t.Fatal(err)
	}
	index := uniqueName("smoke")
	mapping := `{"mappings":{"properties":{
		"cluster":{"type":"keyword"},"uid":{"type":"keyword"},"labels":{"type":"keyword"},
		"object":{"type":"flat_object"}}}}`
	if _, err := client.Indices.Create(ctx, opensearchapi.IndicesCreateReq{Index: index, Body: strings.NewReader(mapping)}); err != nil {
		t.Fatalf("create index: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.Indices.Delete(context.Background(), opensearchapi.IndicesDeleteReq{Indices: []string{index}})
	})

	var bulk bytes.Buffer
	const docs = 25
	for i := range docs {
		cluster := fmt.Sprintf("member%d", i%3+1)
		meta := map[string]any{"index": map[string]any{"_index": index, "_id": fmt.Sprintf("uid-%02d", i), "version": 100 + i, "version_type": "external_gte"}}
		doc := map[string]any{"cluster": cluster, "uid": fmt.Sprintf("uid-%02d", i), "labels": []string{"app.kubernetes.io/name=web"},
			"object": map[string]any{"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web", "app.kubernetes.io/name": "web"}}}}
		writeNDJSON(t, &bulk, meta, doc)
	}
	// A stale version of uid-00 must be rejected; an equal one accepted (external_gte).
	writeNDJSON(t, &bulk, map[string]any{"index": map[string]any{"_index": index, "_id": "uid-00", "version": 50, "version_type": "external_gte"}}, map[string]any{"cluster": "stale"})
	resp, err := client.Bulk(ctx, opensearchapi.BulkReq{Body: &bulk, Params: opensearchapi.BulkParams{Refresh: "true"}})
	if err != nil {
		t.Fatalf("bulk: %v", err)
	}
	last := resp.Items[len(resp.Items)-1]["index"]
	if last.Status != 409 {
		t.Fatalf("stale external version: status %d, want 409 version conflict", last.Status)
	}
	for _, it := range resp.Items[:docs] {
		if it["index"].Status != 201 {
			t.Fatalf("bulk item %s: status %d %+v", it["index"].ID, it["index"].Status, it["index"].Error)
		}
	}

	// flat_object: both `app` and `app.kubernetes.io/name` are leaves of one field, no mapping conflict.
	count := search(t, client, index, `{"query":{"term":{"object.metadata.labels.app.kubernetes.io/name":"web"}}}`).Hits.Total.Value
	if count != docs {
		t.Fatalf("flat_object term query: %d hits, want %d", count, docs)
	}

	pit, err := client.PointInTime.Create(ctx, opensearchapi.PointInTimeCreateReq{Indices: []string{index}, Params: opensearchapi.PointInTimeCreateParams{KeepAlive: time.Minute}})
	if err != nil {
		t.Fatalf("create pit: %v", err)
	}
	seen := map[string]bool{}
	var after []any
	for page := 0; ; page++ {
		body := map[string]any{"size": 7, "pit": map[string]any{"id": pit.PitID, "keep_alive": "1m"}, "sort": []any{map[string]any{"uid": "asc"}}}
		if after != nil {
			body["search_after"] = after
		}
		b, _ := json.Marshal(body)
		res := search(t, client, "", string(b))
		if len(res.Hits.Hits) == 0 {
			break
		}
		for _, h := range res.Hits.Hits {
			if seen[h.ID] {
				t.Fatalf("page %d: %s seen twice", page, h.ID)
			}
			seen[h.ID] = true
		}
		after = res.Hits.Hits[len(res.Hits.Hits)-1].Sort
	}
	if len(seen) != docs {
		t.Fatalf("pit + search_after: %d distinct documents, want %d", len(seen), docs)
	}

	refresh := true
	del, err := client.Document.DeleteByQuery(ctx, opensearchapi.DocumentDeleteByQueryReq{
		Indices: []string{index}, Body: strings.NewReader(`{"query":{"term":{"cluster":"member2"}}}`),
		Params: opensearchapi.DocumentDeleteByQueryParams{Conflicts: "proceed", Refresh: &refresh},
	})
	if err != nil {
		t.Fatalf("delete by query: %v", err)
	}
	if remaining := search(t, client, index, `{"query":{"term":{"cluster":"member2"}}}`).Hits.Total.Value; remaining != 0 || del.Deleted == 0 {
		t.Fatalf("delete by query: deleted %d, %d member2 documents remain", del.Deleted, remaining)
	}
}

func search(t *testing.T, client *opensearchapi.Client, index, body string) *opensearchapi.SearchResp {
	t.Helper()
	req := &opensearchapi.SearchReq{Body: strings.NewReader(body)}
	if index != "" {
		req.Indices = []string{index}
	}
	res, err := client.Search(t.Context(), req)
	if err != nil {
		t.Fatalf("search %s: %v", body, err)
	}
	return res
}

func writeNDJSON(t *testing.T, buf *bytes.Buffer, lines ...any) {
	t.Helper()
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// The controller-manager creates the default ServiceAccount shortly after; Pods are refused until then.
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount: %v", name, err)
	}
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func ptr[T any](v T) *T { return &v }
