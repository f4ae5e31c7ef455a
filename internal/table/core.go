package table

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func configMaps() *Printer {
	type T = corev1.ConfigMap
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Data", corev1.ConfigMap{}.SwaggerDoc()["data"]),
			func(o *T, _ time.Time) any { return int64(len(o.Data) + len(o.BinaryData)) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}}.printer()
}

func secrets() *Printer {
	type T = corev1.Secret
	doc := corev1.Secret{}.SwaggerDoc()
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Type", doc["type"]), func(o *T, _ time.Time) any { return string(o.Type) }},
		{str("Data", doc["data"]), func(o *T, _ time.Time) any { return int64(len(o.Data)) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}}.printer()
}

func namespaces() *Printer {
	type T = corev1.Namespace
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Status", "The status of the namespace"), func(o *T, _ time.Time) any { return string(o.Status.Phase) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}}.printer()
}

func serviceAccounts() *Printer {
	type T = corev1.ServiceAccount
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}}.printer()
}

func nodes() *Printer {
	type T = corev1.Node
	info, status := corev1.NodeSystemInfo{}.SwaggerDoc(), corev1.NodeStatus{}.SwaggerDoc()
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return kind[T]{statusMembers: nodeStatusMembers, columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Status", "The status of the node"), func(o *T, _ time.Time) any { return nodeStatus(o) }},
		{str("Roles", "The roles of the node"), func(o *T, _ time.Time) any { return nodeRoles(o) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
		{str("Version", info["kubeletVersion"]), func(o *T, _ time.Time) any { return o.Status.NodeInfo.KubeletVersion }},
		{wide(str("Internal-IP", status["addresses"])),
			func(o *T, _ time.Time) any { return nodeAddress(o, corev1.NodeInternalIP) }},
		{wide(str("External-IP", status["addresses"])),
			func(o *T, _ time.Time) any { return nodeAddress(o, corev1.NodeExternalIP) }},
		{wide(str("OS-Image", info["osImage"])), func(o *T, _ time.Time) any { return unknown(o.Status.NodeInfo.OSImage) }},
		{wide(str("Kernel-Version", info["kernelVersion"])), func(o *T, _ time.Time) any {
			v := unknown(o.Status.NodeInfo.KernelVersion)
			if a := o.Status.NodeInfo.Architecture; a != "" {
				v += " (" + a + ")"
			}
			return v
		}},
		{wide(str("Container-Runtime", info["containerRuntimeVersion"])),
			func(o *T, _ time.Time) any { return unknown(o.Status.NodeInfo.ContainerRuntimeVersion) }},
	}}.printer()
}

// nodeStatus is Ready, NotReady or Unknown (no Ready condition), then SchedulingDisabled if cordoned.
func nodeStatus(n *corev1.Node) string {
	status := "Unknown"
	// The last condition of a type wins, as it did in the map kubectl built.
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		status = string(c.Type)
		if c.Status != corev1.ConditionTrue {
			status = "Not" + string(c.Type)
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles are the sorted roles named by node-role.kubernetes.io/<role> label keys and by the value
// of a kubernetes.io/role label.
func nodeRoles(n *corev1.Node) string {
	roles := sets.New[string]()
	for k, v := range n.Labels {
		if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok {
			if role != "" {
				roles.Insert(role)
			}
		} else if k == "kubernetes.io/role" && v != "" {
			roles.Insert(v)
		}
	}
	if roles.Len() == 0 {
		return "<none>"
	}
	return strings.Join(sets.List(roles), ",")
}

func nodeAddress(n *corev1.Node, typ corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return "<none>"
}

func persistentVolumeClaims() *Printer {
	type T = corev1.PersistentVolumeClaim
	spec, status := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc(), corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	// Capacity and access modes are the bound volume's, so they show only once a volume is named.
	keys := map[string]func(*T) (string, bool){
		// The quantity in bytes (rounded up), so 2Gi comes before 10Gi and 1500Mi between them.
		"Capacity": func(o *T) (string, bool) {
			q, ok := o.Status.Capacity[corev1.ResourceStorage]
			if o.Spec.VolumeName == "" || !ok {
				return "", false
			}
			return numKey(q.Value()), true
		},
	}
	return kind[T]{keys: keys, columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Status", status["phase"]), func(o *T, _ time.Time) any {
			if o.DeletionTimestamp != nil {
				return "Terminating"
			}
			return string(o.Status.Phase)
		}},
		{str("Volume", spec["volumeName"]), func(o *T, _ time.Time) any { return o.Spec.VolumeName }},
		{str("Capacity", status["capacity"]), func(o *T, _ time.Time) any {
			if o.Spec.VolumeName == "" {
				return ""
			}
			q := o.Status.Capacity[corev1.ResourceStorage]
			return q.String()
		}},
		{str("Access Modes", status["accessModes"]), func(o *T, _ time.Time) any {
			if o.Spec.VolumeName == "" {
				return ""
			}
			return accessModes(o.Status.AccessModes)
		}},
		{str("StorageClass", "StorageClass of the pvc"), func(o *T, _ time.Time) any {
			if class, ok := o.Annotations[corev1.BetaStorageClassAnnotation]; ok {
				return class
			}
			if o.Spec.StorageClassName != nil {
				return *o.Spec.StorageClassName
			}
			return ""
		}},
		{str("VolumeAttributesClass", "VolumeAttributesClass of the pvc"), func(o *T, _ time.Time) any {
			if o.Spec.VolumeAttributesClassName != nil {
				return *o.Spec.VolumeAttributesClassName
			}
			return "<unset>"
		}},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
		{wide(str("VolumeMode", spec["volumeMode"])), func(o *T, _ time.Time) any {
			if o.Spec.VolumeMode != nil {
				return string(*o.Spec.VolumeMode)
			}
			return "<unset>"
		}},
	}}.printer()
}

// accessModes abbreviates access modes in a fixed order, each once.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	var s []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, m.mode) {
			s = append(s, m.short)
		}
	}
	return strings.Join(s, ",")
}

func events() *Printer { return eventPrinter(nil) }

// eventsV1 prints events.k8s.io Events, which kube-apiserver stores as core Events and prints alike.
func eventsV1() *Printer {
	return eventPrinter(func(obj []byte) (*corev1.Event, error) {
		var e eventsv1.Event
		if err := unmarshal(obj, &e); err != nil {
			return nil, err
		}
		return &corev1.Event{
			ObjectMeta: e.ObjectMeta, InvolvedObject: e.Regarding, Reason: e.Reason, Message: e.Note,
			Source: e.DeprecatedSource, FirstTimestamp: e.DeprecatedFirstTimestamp,
			LastTimestamp: e.DeprecatedLastTimestamp, Count: e.DeprecatedCount, Type: e.Type,
			EventTime: e.EventTime, Series: coreSeries(e.Series), Action: e.Action, Related: e.Related,
			ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		}, nil
	})
}

func coreSeries(s *eventsv1.EventSeries) *corev1.EventSeries {
	if s == nil {
		return nil
	}
	return &corev1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
}

func eventPrinter(decode func([]byte) (*corev1.Event, error)) *Printer {
	type T = corev1.Event
	doc := corev1.Event{}.SwaggerDoc()
	// An event first seen is dated by firstTimestamp, else (new API) by eventTime; last seen by the
	// series, else lastTimestamp, else as first seen.
	first := func(o *T, now time.Time) string {
		if o.FirstTimestamp.IsZero() {
			return sinceMicro(o.EventTime, now)
		}
		return since(o.FirstTimestamp, now)
	}
	// The instants LAST SEEN and FIRST SEEN print the age of.
	firstAt := func(o *T) time.Time {
		if o.FirstTimestamp.IsZero() {
			return o.EventTime.Time
		}
		return o.FirstTimestamp.Time
	}
	lastAt := func(o *T) time.Time {
		switch {
		case o.Series != nil:
			return o.Series.LastObservedTime.Time
		case o.LastTimestamp.IsZero():
			return firstAt(o)
		}
		return o.LastTimestamp.Time
	}
	keys := map[string]func(*T) (string, bool){
		"Last Seen":  func(o *T) (string, bool) { return ageKey(lastAt(o)) },
		"First Seen": func(o *T) (string, bool) { return ageKey(firstAt(o)) },
	}
	return kind[T]{decode: decode, keys: keys, columns: []column[T]{
		{str("Last Seen", doc["lastTimestamp"]), func(o *T, now time.Time) any {
			switch {
			case o.Series != nil:
				return sinceMicro(o.Series.LastObservedTime, now)
			case o.LastTimestamp.IsZero():
				return first(o, now)
			}
			return since(o.LastTimestamp, now)
		}},
		{str("Type", doc["type"]), func(o *T, _ time.Time) any { return o.Type }},
		{str("Reason", doc["reason"]), func(o *T, _ time.Time) any { return o.Reason }},
		{str("Object", doc["involvedObject"]), func(o *T, _ time.Time) any {
			k := strings.ToLower(o.InvolvedObject.Kind)
			if o.InvolvedObject.Name == "" {
				return k
			}
			return fmt.Sprintf("%s/%s", k, o.InvolvedObject.Name)
		}},
		{wide(str("Subobject", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"])),
			func(o *T, _ time.Time) any { return o.InvolvedObject.FieldPath }},
		{wide(str("Source", doc["source"])), func(o *T, _ time.Time) any {
			component, host := firstNonEmpty(o.Source.Component, o.ReportingController), firstNonEmpty(o.Source.Host, o.ReportingInstance)
			if host == "" {
				return component
			}
			return component + ", " + host
		}},
		{str("Message", doc["message"]), func(o *T, _ time.Time) any { return strings.TrimSpace(o.Message) }},
		{wide(str("First Seen", doc["firstTimestamp"])), func(o *T, now time.Time) any { return first(o, now) }},
		{wide(str("Count", doc["count"])), func(o *T, _ time.Time) any {
			switch {
			case o.Series != nil:
				return int64(o.Series.Count)
			case o.Count == 0: // singleton events of the new API have no count
				return int64(1)
			}
			return int64(o.Count)
		}},
		{wide(nameColumn()), func(o *T, _ time.Time) any { return o.Name }},
	}}.printer()
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
