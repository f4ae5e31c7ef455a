package queryapi

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Events are served in both API groups, whichever one is collected. A member's core v1 Events and
// its events.k8s.io/v1 Events are the same objects (kube-apiserver stores one and converts), and
// clients split between them: kubectl describe and kubectl events read the core group, k9s and
// newer controllers events.k8s.io. A registry selects one (selecting both is a validation error:
// both would be stored in kubernetes-event under one (cluster, uid) key and overwrite each other),
// and the facade serves the other group's resource from the same documents, converted as
// kube-apiserver converts them (pkg/apis/events/v1/conversion.go): involvedObject ↔ regarding,
// message ↔ note, source ↔ deprecatedSource, firstTimestamp, lastTimestamp and count ↔ their
// deprecated* fields, reportingComponent ↔ reportingController; reason, type, action, related,
// eventTime, series and reportingInstance keep their names.
//
// A group some member collects natively is served from those members only: a fleet collecting
// Events in one group in some members and in the other elsewhere (mid-change of its registries)
// answers each group from the members that collect it. Only v1 of both groups is converted;
// events.k8s.io/v1beta1 (gone since Kubernetes 1.25) is served as collected.

// eventsGroup is the API group of the newer Event API.
const eventsGroup = registry.EventsGroup

// storedForm is the group and version a resource's documents hold when the facade serves them
// converted into another group.
type storedForm struct {
	group, version string
}

// eventSibling is the resource the facade serves from the documents of a collected resource,
// besides itself: the other group's Events.
func eventSibling(group, version, resource string) (storedForm, bool) {
	g, v, ok := registry.EventsSibling(group, version, resource)
	return storedForm{group: g, version: v}, ok
}

// storeGroup is the API group of the resource's documents.
func (r apiResource) storeGroup() string {
	if r.from != nil {
		return r.from.group
	}
	return r.Group
}

// pair is the resource's (cluster, group, resource) as the index and the event stream key it.
func (r apiResource) pair(cluster string) store.Pair {
	return store.Pair{Cluster: cluster, Group: r.storeGroup(), Resource: r.Resource}
}

// served is a stored object as the resource serves it: converted into the served group when the
// documents hold the other one.
func (r apiResource) served(stored []byte) ([]byte, error) {
	switch {
	case r.from == nil:
		return stored, nil
	case r.from.group == "":
		return coreEventAsEventsV1(stored)
	}
	return eventsV1AsCoreEvent(stored)
}

// storedQuery turns a query made for the served resource into one over its documents: the
// resource in the stored group, the subject's scope (computed for the served group, which is what
// the subject was authorized for) moved to it, and field selectors named as the stored group names
// them (regarding.name is involvedObject.name in a core Event). A grant of the stored group alone
// is no grant of the served one, as RBAC has it: it is dropped.
func (r apiResource) storedQuery(q *query.Query) {
	if r.from == nil {
		return
	}
	stored := query.Resource{Resource: r.Resource, Group: r.from.group}
	q.Resources = []query.Resource{stored}
	if q.Scope != nil {
		grants := make([]query.Grant, 0, len(q.Scope.Grants))
		for _, g := range q.Scope.Grants {
			if len(g.Resources) == 0 {
				grants = append(grants, g)
				continue
			}
			var rs []query.Resource
			for _, x := range g.Resources {
				switch {
				case x.Resource != r.Resource:
					rs = append(rs, x)
				case x.AnyGroup || x.Group == r.Group:
					rs = append(rs, stored)
				}
			}
			if len(rs) > 0 {
				g.Resources = rs
				grants = append(grants, g)
			}
		}
		q.Scope = &query.Scope{Grants: grants}
	}
	for i := range q.Fields {
		q.Fields[i].Key = eventPathIn(r.from.group, q.Fields[i].Key)
	}
}

// eventFieldNames pairs the names of an Event's renamed fields: core group, events.k8s.io.
var eventFieldNames = [][2]string{
	{"involvedObject", "regarding"},
	{"message", "note"},
	{"source", "deprecatedSource"},
	{"firstTimestamp", "deprecatedFirstTimestamp"},
	{"lastTimestamp", "deprecatedLastTimestamp"},
	{"count", "deprecatedCount"},
	{"reportingComponent", "reportingController"},
}

// eventPathIn names a field path of the other group's Event as group's Event names it.
func eventPathIn(group, path string) string {
	head, rest, dotted := strings.Cut(path, ".")
	for _, n := range eventFieldNames {
		from, to := n[1], n[0] // events.k8s.io → core
		if group == eventsGroup {
			from, to = n[0], n[1]
		}
		if head == from {
			if dotted {
				return to + "." + rest
			}
			return to
		}
	}
	return path
}

// coreEventAsEventsV1 is a stored core v1 Event as events.k8s.io/v1 serves it.
func coreEventAsEventsV1(stored []byte) ([]byte, error) {
	var in corev1.Event
	if err := json.Unmarshal(stored, &in); err != nil {
		return nil, fmt.Errorf("%w: core Event: %v", errNoStore, err)
	}
	out := eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta: in.ObjectMeta, EventTime: in.EventTime, ReportingController: in.ReportingController,
		ReportingInstance: in.ReportingInstance, Action: in.Action, Reason: in.Reason, Regarding: in.InvolvedObject,
		Related: in.Related, Note: in.Message, Type: in.Type, DeprecatedSource: in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp, DeprecatedLastTimestamp: in.LastTimestamp, DeprecatedCount: in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return json.Marshal(&out)
}

// eventsV1AsCoreEvent is a stored events.k8s.io/v1 Event as the core group serves it.
func eventsV1AsCoreEvent(stored []byte) ([]byte, error) {
	var in eventsv1.Event
	if err := json.Unmarshal(stored, &in); err != nil {
		return nil, fmt.Errorf("%w: events.k8s.io Event: %v", errNoStore, err)
	}
	out := corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: in.ObjectMeta, InvolvedObject: in.Regarding, Reason: in.Reason, Message: in.Note,
		Source: in.DeprecatedSource, FirstTimestamp: in.DeprecatedFirstTimestamp, LastTimestamp: in.DeprecatedLastTimestamp,
		Count: in.DeprecatedCount, Type: in.Type, EventTime: in.EventTime, Action: in.Action, Related: in.Related,
		ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return json.Marshal(&out)
}
