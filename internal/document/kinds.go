package document

import "github.com/tidwall/gjson"

// Members of status and spec that helper fields are made of. Each set is found in one pass (pick):
// every gjson Get would scan all of status or spec again, and a Pod's are most of its bytes.
const (
	stConditions = iota
	stPhase
	stPodIP
	stPodIPs
	stHostIP
	stHostIPs
	stQOSClass
	stContainerStatuses
	stInitContainerStatuses
	stNodeInfo
	stReadyReplicas
	stAvailableReplicas
	stUpdatedReplicas
	stDesiredNumberScheduled
	stNumberReady
	stNumberAvailable
	stUpdatedNumberScheduled
	stCount
)

var statusKeys = [stCount]string{
	stConditions:             "conditions",
	stPhase:                  "phase",
	stPodIP:                  "podIP",
	stPodIPs:                 "podIPs",
	stHostIP:                 "hostIP",
	stHostIPs:                "hostIPs",
	stQOSClass:               "qosClass",
	stContainerStatuses:      "containerStatuses",
	stInitContainerStatuses:  "initContainerStatuses",
	stNodeInfo:               "nodeInfo",
	stReadyReplicas:          "readyReplicas",
	stAvailableReplicas:      "availableReplicas",
	stUpdatedReplicas:        "updatedReplicas",
	stDesiredNumberScheduled: "desiredNumberScheduled",
	stNumberReady:            "numberReady",
	stNumberAvailable:        "numberAvailable",
	stUpdatedNumberScheduled: "updatedNumberScheduled",
}

const (
	// The three container lists come first and in this order, as containerKeys.
	spInitContainers = iota
	spContainers
	spEphemeralContainers
	spNodeName
	spTemplate
	spJobTemplate
	spReplicas
	spUnschedulable
	spType
	spClusterIP
	spClusterIPs
	spCount
)

var specKeys = [spCount]string{
	spInitContainers:      "initContainers",
	spContainers:          "containers",
	spEphemeralContainers: "ephemeralContainers",
	spNodeName:            "nodeName",
	spTemplate:            "template",
	spJobTemplate:         "jobTemplate",
	spReplicas:            "replicas",
	spUnschedulable:       "unschedulable",
	spType:                "type",
	spClusterIP:           "clusterIP",
	spClusterIPs:          "clusterIPs",
}

// containerKeys are the container lists of a Pod spec, in the order the kubelet starts them.
var containerKeys = [3]string{"initContainers", "containers", "ephemeralContainers"}

// pick sets out[i] to the member of obj named keys[i], in one pass over obj.
func pick(obj gjson.Result, keys []string, out []gjson.Result) {
	forEach(obj, func(k, v gjson.Result) bool {
		for i, key := range keys {
			if k.Str == key {
				out[i] = v
				break
			}
		}
		return true
	})
}

// kindFields writes the per-kind helper fields. Kinds are matched with their group, so a custom
// resource that happens to be called Pod gets none of them.
func (w *docWriter) kindFields(group, kind string, v *objectView, st *[stCount]gjson.Result, text *stringSet) {
	var sp [spCount]gjson.Result
	switch group {
	case "", "apps", "batch":
		pick(v.spec, specKeys[:], sp[:])
	case "events.k8s.io":
		if kind == "Event" {
			w.event(v)
		}
		return
	default:
		return
	}
	switch group {
	case "":
		switch kind {
		case "Pod":
			w.pod(&sp, st, text)
		case "Node":
			if kv := st[stNodeInfo].Get("kubeletVersion").Str; kv != "" {
				w.str(FieldKubeletVersion, kv)
			}
			w.bool(FieldUnschedulable, sp[spUnschedulable].Bool())
			w.bool(FieldReady, conditionTrue(st[stConditions], "Ready"))
		case "Service":
			if t := sp[spType].Str; t != "" {
				w.str(FieldType, t)
			}
			w.ips(FieldClusterIP, sp[spClusterIPs], "", sp[spClusterIP])
		case "Secret":
			if v.typ.Str != "" {
				w.str(FieldType, v.typ.Str)
			}
		case "Event":
			w.event(v)
		case "ReplicationController":
			w.podTemplate(sp[spTemplate].Get("spec"), text)
			w.replicas(sp[spReplicas], st[stReadyReplicas], st[stAvailableReplicas], gjson.Result{}, false)
		}
	case "apps":
		w.podTemplate(sp[spTemplate].Get("spec"), text)
		switch kind {
		case "Deployment", "StatefulSet":
			w.replicas(sp[spReplicas], st[stReadyReplicas], st[stAvailableReplicas], st[stUpdatedReplicas], true)
		case "ReplicaSet":
			w.replicas(sp[spReplicas], st[stReadyReplicas], st[stAvailableReplicas], gjson.Result{}, false)
		case "DaemonSet":
			// A DaemonSet wants one Pod per eligible node: its "replicas" are the scheduled count.
			w.replicas(st[stDesiredNumberScheduled], st[stNumberReady], st[stNumberAvailable], st[stUpdatedNumberScheduled], true)
		}
	case "batch":
		switch kind {
		case "Job":
			w.podTemplate(sp[spTemplate].Get("spec"), text)
		case "CronJob":
			w.podTemplate(sp[spJobTemplate].Get("spec.template.spec"), text)
		}
	}
}

func (w *docWriter) event(v *objectView) {
	if v.typ.Str != "" {
		w.str(FieldType, v.typ.Str)
	}
	if v.reason.Str != "" {
		w.str(FieldReason, v.reason.Str)
	}
}
