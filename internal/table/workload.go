package table

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
)

const (
	containersDoc = "Names of each container in the template."
	imagesDoc     = "Images referenced by each container in the template."
)

// templateColumns are the wide CONTAINERS and IMAGES columns of a workload with a Pod template.
func templateColumns[T any](spec func(*T) *corev1.PodSpec) []column[T] {
	return []column[T]{
		{wide(str("Containers", containersDoc)), func(o *T, _ time.Time) any { return containerNames(spec(o).Containers) }},
		{wide(str("Images", imagesDoc)), func(o *T, _ time.Time) any { return containerImages(spec(o).Containers) }},
	}
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

func containerImages(cs []corev1.Container) string {
	images := make([]string, len(cs))
	for i, c := range cs {
		images[i] = c.Image
	}
	return strings.Join(images, ",")
}

func deployments() *Printer {
	type T = appsv1.Deployment
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Ready", "Number of the pod with ready state"), func(o *T, _ time.Time) any {
			return fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, ptr.Deref(o.Spec.Replicas, 0))
		}},
		{str("Up-to-date", appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
			func(o *T, _ time.Time) any { return int64(o.Status.UpdatedReplicas) }},
		{str("Available", appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
			func(o *T, _ time.Time) any { return int64(o.Status.AvailableReplicas) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.Template.Spec })...)
	cols = append(cols, column[T]{wide(str("Selector", appsv1.DeploymentSpec{}.SwaggerDoc()["selector"])),
		func(o *T, _ time.Time) any {
			// Unlike the other workloads, an empty selector prints as nothing rather than <none>.
			s, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
			if err != nil {
				return "<invalid>"
			}
			return s.String()
		}})
	return kind[T]{columns: cols, keys: map[string]func(*T) (string, bool){
		// The ready replicas, then the desired ones: 0/3 < 1/1 < 1/3 < 2/2.
		"Ready": func(o *T) (string, bool) {
			return numKey(int64(o.Status.ReadyReplicas), int64(ptr.Deref(o.Spec.Replicas, 0))), true
		},
	}}.printer()
}

func replicaSets() *Printer {
	type T = appsv1.ReplicaSet
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{integer("Desired", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
			func(o *T, _ time.Time) any { return int64(ptr.Deref(o.Spec.Replicas, 0)) }},
		{integer("Current", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
			func(o *T, _ time.Time) any { return int64(o.Status.Replicas) }},
		{integer("Ready", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
			func(o *T, _ time.Time) any { return int64(o.Status.ReadyReplicas) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.Template.Spec })...)
	cols = append(cols, column[T]{wide(str("Selector", appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"])),
		func(o *T, _ time.Time) any { return metav1.FormatLabelSelector(o.Spec.Selector) }})
	return kind[T]{columns: cols}.printer()
}

func statefulSets() *Printer {
	type T = appsv1.StatefulSet
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Ready", "Number of the pod with ready state"), func(o *T, _ time.Time) any {
			return fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, ptr.Deref(o.Spec.Replicas, 0))
		}},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.Template.Spec })...)
	return kind[T]{columns: cols, keys: map[string]func(*T) (string, bool){
		// The ready replicas, then the desired ones: 0/3 < 1/1 < 1/3 < 2/2.
		"Ready": func(o *T) (string, bool) {
			return numKey(int64(o.Status.ReadyReplicas), int64(ptr.Deref(o.Spec.Replicas, 0))), true
		},
	}}.printer()
}

func daemonSets() *Printer {
	type T = appsv1.DaemonSet
	doc := appsv1.DaemonSetStatus{}.SwaggerDoc()
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{integer("Desired", doc["desiredNumberScheduled"]), func(o *T, _ time.Time) any { return int64(o.Status.DesiredNumberScheduled) }},
		{integer("Current", doc["currentNumberScheduled"]), func(o *T, _ time.Time) any { return int64(o.Status.CurrentNumberScheduled) }},
		{integer("Ready", doc["numberReady"]), func(o *T, _ time.Time) any { return int64(o.Status.NumberReady) }},
		{integer("Up-to-date", doc["updatedNumberScheduled"]), func(o *T, _ time.Time) any { return int64(o.Status.UpdatedNumberScheduled) }},
		{integer("Available", doc["numberAvailable"]), func(o *T, _ time.Time) any { return int64(o.Status.NumberAvailable) }},
		{str("Node Selector", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]),
			func(o *T, _ time.Time) any { return labels.FormatLabels(o.Spec.Template.Spec.NodeSelector) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.Template.Spec })...)
	cols = append(cols, column[T]{wide(str("Selector", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"])),
		func(o *T, _ time.Time) any { return metav1.FormatLabelSelector(o.Spec.Selector) }})
	return kind[T]{columns: cols}.printer()
}

func jobs() *Printer {
	type T = batchv1.Job
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Status", "Status of the job."), func(o *T, _ time.Time) any { return jobStatus(o) }},
		{str("Completions", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]), func(o *T, _ time.Time) any {
			if o.Spec.Completions != nil {
				return fmt.Sprintf("%d/%d", o.Status.Succeeded, *o.Spec.Completions)
			}
			if p := ptr.Deref(o.Spec.Parallelism, 0); p > 1 {
				return fmt.Sprintf("%d/1 of %d", o.Status.Succeeded, p)
			}
			return fmt.Sprintf("%d/1", o.Status.Succeeded)
		}},
		{str("Duration", "Time required to complete the job."), func(o *T, now time.Time) any {
			switch start, end := o.Status.StartTime, o.Status.CompletionTime; {
			case start == nil:
				return ""
			case end == nil:
				return duration.HumanDuration(now.Sub(start.Time))
			default:
				return duration.HumanDuration(end.Sub(start.Time))
			}
		}},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.Template.Spec })...)
	cols = append(cols, column[T]{wide(str("Selector", batchv1.JobSpec{}.SwaggerDoc()["selector"])),
		func(o *T, _ time.Time) any { return metav1.FormatLabelSelector(o.Spec.Selector) }})
	return kind[T]{columns: cols, statusMembers: jobStatusMembers, keys: map[string]func(*T) (string, bool){
		// Succeeded, then the completions asked for (1 when unset, as the cell prints).
		"Completions": func(o *T) (string, bool) {
			return numKey(int64(o.Status.Succeeded), int64(ptr.Deref(o.Spec.Completions, 1))), true
		},
		// A finished Job's duration; a running one's moves with the clock, so it has none.
		"Duration": func(o *T) (string, bool) {
			if o.Status.StartTime == nil || o.Status.CompletionTime == nil {
				return "", false
			}
			return numKey(o.Status.CompletionTime.Sub(o.Status.StartTime.Time).Milliseconds()), true
		},
	}}.printer()
}

// jobStatus is the first that holds of: finished (Complete, Failed), being deleted, Suspended, about
// to finish (FailureTarget, SuccessCriteriaMet), else Running.
func jobStatus(j *batchv1.Job) string {
	switch {
	case jobCondition(j, batchv1.JobComplete):
		return "Complete"
	case jobCondition(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case jobCondition(j, batchv1.JobSuspended):
		return "Suspended"
	case jobCondition(j, batchv1.JobFailureTarget):
		return "FailureTarget"
	case jobCondition(j, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

// jobCondition tells whether the first condition of that type is true.
func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func cronJobs() *Printer {
	type T = batchv1.CronJob
	spec, status := batchv1.CronJobSpec{}.SwaggerDoc(), batchv1.CronJobStatus{}.SwaggerDoc()
	cols := []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Schedule", spec["schedule"]), func(o *T, _ time.Time) any { return o.Spec.Schedule }},
		{str("Timezone", spec["timeZone"]), func(o *T, _ time.Time) any { return ptr.Deref(o.Spec.TimeZone, "<none>") }},
		{metav1.TableColumnDefinition{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
			func(o *T, _ time.Time) any {
				switch {
				case o.Spec.Suspend == nil:
					return "<unset>"
				case *o.Spec.Suspend:
					return "True"
				}
				return "False"
			}},
		{integer("Active", status["active"]), func(o *T, _ time.Time) any { return int64(len(o.Status.Active)) }},
		{str("Last Schedule", status["lastScheduleTime"]), func(o *T, now time.Time) any {
			if o.Status.LastScheduleTime == nil {
				return "<none>"
			}
			return since(*o.Status.LastScheduleTime, now)
		}},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}
	cols = append(cols, templateColumns(func(o *T) *corev1.PodSpec { return &o.Spec.JobTemplate.Spec.Template.Spec })...)
	cols = append(cols, column[T]{wide(str("Selector", batchv1.JobSpec{}.SwaggerDoc()["selector"])),
		func(o *T, _ time.Time) any { return metav1.FormatLabelSelector(o.Spec.JobTemplate.Spec.Selector) }})
	return kind[T]{columns: cols, keys: map[string]func(*T) (string, bool){
		"Last Schedule": func(o *T) (string, bool) {
			if o.Status.LastScheduleTime == nil {
				return "", false
			}
			return metaAgeKey(*o.Status.LastScheduleTime)
		},
	}}.printer()
}
