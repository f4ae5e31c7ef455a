package simulate

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubesearch/kubesearch/internal/fixtures"
)

// stencilKey names a stencil: what differs between objects beyond their holes.
type stencilKey struct {
	k       int
	app     int32
	aux     uint32
	version string // a CustomResourceDefinition's served version
}

func (s *Simulator) stencil(key stencilKey) (*stencil, error) {
	if st, ok := s.stencils.Load(key); ok {
		return st.(*stencil), nil
	}
	obj, err := s.stencilObject(key)
	if err != nil {
		return nil, err
	}
	st, err := newStencil(obj)
	if err != nil {
		return nil, fmt.Errorf("stencil of %s: %w", kinds[key.k].id(), err)
	}
	actual, _ := s.stencils.LoadOrStore(key, st)
	return actual.(*stencil), nil
}

// stencilObject is the object a stencil is made of: the fixture with marks for its holes.
func (s *Simulator) stencilObject(key stencilKey) (any, error) {
	if key.k == kCRD {
		return crdObject(int(key.app), key.version), nil
	}
	ap := s.app(int(key.app))
	a := ap.App
	a.Version, a.Zone = mark(hVersion), mark(hZone)
	meta := fixtures.Meta{Name: mark(hName), UID: mark(hUID), ResourceVersion: mark(hRV), Created: s.start}
	var (
		obj any
		set = map[string]string{"metadata.creationTimestamp": mark(hCreated)}
	)
	switch key.k {
	case kDeployment:
		obj = a.Deployment(meta, 1)
		set["metadata.generation"], set["status.observedGeneration"] = mark(hGen), mark(hGen)
	case kReplicaSet:
		hash, replicas := ap.hash, a.Replicas
		if key.aux == 1 {
			hash, replicas = ap.oldHash, 0
		}
		obj = a.ReplicaSet(meta, hash, mark(hOwnerUID), replicas)
	case kService:
		obj = a.Service(meta, mark(hClusterIP))
	case kConfigMap:
		obj = a.ConfigMap(meta, mark(hRevision))
	case kPod:
		state := fixtures.PodState(key.aux)
		obj = a.Pod(meta, a.Name+"-"+ap.hash, ap.hash, mark(hOwnerUID), state,
			fixtures.PodPlace{Node: mark(hNode), HostIP: mark(hHostIP), PodIP: mark(hPodIP)}, 0)
		if state == fixtures.PodRunning || state == fixtures.PodCrashLooping {
			set["status.containerStatuses.0.restartCount"] = mark(hRestarts)
		}
	case kEvent:
		obj = s.eventObject(ap, key.aux, meta)
		set["count"], set["lastTimestamp"], set["firstTimestamp"] = mark(hCount), mark(hLast), mark(hCreated)
	case kWidget:
		obj = a.CustomResource(meta, mark(hAPIVersion), "Widget", map[string]any{"size": []string{"small", "medium", "large"}[key.app%3],
			"color": "blue", "replicas": int64(a.Replicas), "revision": mark(hGen)})
		set["metadata.generation"], set["status.observedGeneration"] = mark(hGen), mark(hGen)
	case kGadget:
		obj = a.CustomResource(meta, mark(hAPIVersion), "Gadget", map[string]any{"target": a.Name, "schedule": "*/15 * * * *",
			"revision": mark(hGen)})
		set["metadata.generation"], set["status.observedGeneration"] = mark(hGen), mark(hGen)
	default:
		return nil, fmt.Errorf("no stencil for kind %d", key.k)
	}
	return withMarks(obj, set)
}

// withMarks returns obj as a map with the values of set at their dotted paths (a number is an
// index into a list).
func withMarks(obj any, set map[string]string) (map[string]any, error) {
	m, ok := obj.(map[string]any)
	if !ok {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	for path, v := range set {
		if err := setPath(m, path, v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return m, nil
}

func setPath(m map[string]any, path, v string) error {
	var cur any = m
	fields := splitPath(path)
	for i, f := range fields {
		last := i == len(fields)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[f] = v
				return nil
			}
			cur = c[f]
		case []any:
			n, err := strconv.Atoi(f)
			if err != nil || n >= len(c) {
				return fmt.Errorf("no element %s", f)
			}
			if last {
				c[n] = v
				return nil
			}
			cur = c[n]
		default:
			return fmt.Errorf("no field %s", f)
		}
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := range len(p) {
		if p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

// Event reasons (object.aux of an Event).
const (
	eventScaled  = iota // about the Deployment: the rollout scaled its ReplicaSet
	eventBackOff        // about a Pod: its container keeps crashing
	eventPulled         // about a Pod: its image was there
	eventReasons
)

func (s *Simulator) eventObject(ap *app, reason uint32, meta fixtures.Meta) any {
	a := ap.App
	image := a.Image + ":" + mark(hVersion)
	switch reason {
	case eventBackOff:
		return a.Event(meta, fixtures.EventAbout{Kind: "Pod", APIVersion: "v1", Name: mark(hAboutName), UID: mark(hAboutUID)},
			"Warning", "BackOff", "Back-off restarting failed container "+a.Name+" in pod "+mark(hAboutName)+"_"+a.Namespace+"("+mark(hAboutUID)+")",
			"kubelet", 1, s.start)
	case eventPulled:
		return a.Event(meta, fixtures.EventAbout{Kind: "Pod", APIVersion: "v1", Name: mark(hAboutName), UID: mark(hAboutUID)},
			"Normal", "Pulled", `Container image "`+image+`" already present on machine`, "kubelet", 1, s.start)
	}
	return a.Event(meta, fixtures.EventAbout{Kind: "Deployment", APIVersion: "apps/v1", Name: mark(hAboutName), UID: mark(hAboutUID)},
		"Normal", "ScalingReplicaSet", fmt.Sprintf("Scaled up replica set %s-%s from 0 to %d", a.Name, ap.hash, a.Replicas),
		"deployment-controller", 1, s.start)
}

// crdObject is the CustomResourceDefinition of widgets (0) or gadgets (1) as a member serving it at
// version has it installed; widgets have a printer column, so the facade's Table has one.
func crdObject(which int, version string) map[string]any {
	k := kinds[kWidget]
	if which == 1 {
		k = kinds[kGadget]
	}
	v := map[string]any{"name": version, "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{
		"type": "object", "x-kubernetes-preserve-unknown-fields": true}}, "subresources": map[string]any{"status": map[string]any{}}}
	if which == 0 {
		v["additionalPrinterColumns"] = []any{
			map[string]any{"name": "Size", "type": "string", "jsonPath": ".spec.size"},
			map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
		}
	}
	names := map[string]any{"kind": k.kind, "listKind": k.kind + "List", "plural": k.resource, "singular": k.singular}
	if len(k.shortNames) > 0 {
		names["shortNames"] = toAnySlice(k.shortNames)
	}
	if len(k.categories) > 0 {
		names["categories"] = toAnySlice(k.categories)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": k.resource + "." + k.group, "uid": mark(hUID), "resourceVersion": mark(hRV),
			"generation": int64(1), "creationTimestamp": mark(hCreated),
			"labels": map[string]any{"app.kubernetes.io/name": k.resource + "-operator", "app.kubernetes.io/managed-by": "Helm"}},
		"spec": map[string]any{"group": k.group, "names": names, "scope": "Namespaced", "versions": []any{v},
			"conversion": map[string]any{"strategy": "None"}},
		"status": map[string]any{"acceptedNames": names, "storedVersions": []any{version}, "conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found"},
			map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
		}},
	}}
	return u.Object
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// renderer fills stencils; each writer has its own, so rendering allocates nothing once warm.
type renderer struct {
	values  [holeCount][]byte
	scratch []byte
	out     []byte
}

// nodes is how many nodes a simulated cluster has.
const nodes = 24

// name appends the object's name.
func (s *Simulator) name(dst []byte, c *cluster, k int, o *object) []byte {
	if k == kCRD {
		kk := kinds[kWidget]
		if o.app == 1 {
			kk = kinds[kGadget]
		}
		return append(append(append(dst, kk.resource...), '.'), kk.group...)
	}
	if k == kEvent {
		dst = append(s.eventAbout(dst, c, o), '.')
		h := s.objectHash(c, k, o, 6)
		for i := range 16 {
			dst = append(dst, hexDigits[h>>(4*i)&0xf])
		}
		return dst
	}
	ap := s.app(int(o.app))
	dst = append(dst, ap.Name...)
	switch k {
	case kReplicaSet:
		dst = append(dst, '-')
		if o.aux == 1 {
			return append(dst, ap.oldHash...)
		}
		return append(dst, ap.hash...)
	case kConfigMap:
		dst = append(dst, "-config"...)
		if o.ord != 0 {
			dst = appendSafe(append(dst, '-'), s.objectHash(c, k, o, 5), 5)
		}
	case kPod:
		dst = append(append(append(dst, '-'), ap.hash...), '-')
		dst = appendSafe(dst, s.objectHash(c, k, o, 5), 5)
	}
	return dst
}

// objectHash is a hash of the object's identity; objects the churn created mix in the run, so an
// object created in one run is not created again, under the same uid, by a later run.
func (s *Simulator) objectHash(c *cluster, k int, o *object, salt uint64) uint64 {
	h := mix(s.seed, uint64(c.i), uint64(k), uint64(o.app), uint64(o.ord), salt)
	if o.ord >= churnOrd {
		h = mix(h, s.run)
	}
	return h
}

func (s *Simulator) appendUID(dst []byte, c *cluster, k int, o *object) []byte {
	return appendUID(dst, s.objectHash(c, k, o, 1), s.objectHash(c, k, o, 2))
}

// eventAbout appends the name of the object an Event is about: its app's Deployment, or one of its
// app's Pods (ord in aboutOrd).
func (s *Simulator) eventAbout(dst []byte, c *cluster, o *object) []byte {
	if o.aux == eventScaled {
		return append(dst, s.app(int(o.app)).Name...)
	}
	about := object{app: o.app, ord: o.ord % uint32(s.app(int(o.app)).Replicas)}
	return s.name(dst, c, kPod, &about)
}

func (s *Simulator) eventAboutUID(dst []byte, c *cluster, o *object) []byte {
	if o.aux == eventScaled {
		return s.appendUID(dst, c, kDeployment, &object{app: o.app})
	}
	about := object{app: o.app, ord: o.ord % uint32(s.app(int(o.app)).Replicas)}
	return s.appendUID(dst, c, kPod, &about)
}

// render returns the object's JSON as the member would serve it, valid until the next render.
func (s *Simulator) render(r *renderer, c *cluster, k int, o *object) ([]byte, error) {
	key := stencilKey{k: k, app: o.app, aux: o.aux}
	switch k {
	case kCRD:
		key.version = c.served[kWidget+int(o.app)]
	case kDeployment, kService, kConfigMap, kWidget, kGadget:
		key.aux = 0
	}
	st, err := s.stencil(key)
	if err != nil {
		return nil, err
	}
	b := r.scratch[:0]
	put := func(h hole, start int) { r.values[h] = b[start:len(b):len(b)] }
	at := len(b)
	b = s.name(b, c, k, o)
	put(hName, at)
	at = len(b)
	b = s.appendUID(b, c, k, o)
	put(hUID, at)
	at = len(b)
	b = strconv.AppendInt(b, o.rv, 10)
	put(hRV, at)
	at = len(b)
	b = time.Unix(o.created, 0).UTC().AppendFormat(b, time.RFC3339)
	put(hCreated, at)
	at = len(b)
	if k != kCRD {
		b = append(b, s.app(int(o.app)).version(c)...)
	}
	put(hVersion, at)
	at = len(b)
	b = strconv.AppendUint(b, uint64(o.gen)+1, 10)
	put(hGen, at)
	switch k {
	case kPod:
		h := s.objectHash(c, k, o, 7)
		at = len(b)
		b = append(append(b, c.region...), 'a'+byte(h%3))
		put(hZone, at)
		node := h >> 8 % nodes
		at = len(b)
		b = fmt.Appendf(b, "ip-10-%d-%d-%d.%s.compute.internal", c.i%250, node/250, node%250, c.region)
		put(hNode, at)
		at = len(b)
		b = fmt.Appendf(b, "10.%d.%d.%d", c.i%250, node/250, node%250)
		put(hHostIP, at)
		at = len(b)
		b = fmt.Appendf(b, "100.%d.%d.%d", 64+c.i%64, h>>16%256, 1+h>>24%253)
		put(hPodIP, at)
		at = len(b)
		b = s.appendUID(b, c, kReplicaSet, &object{app: o.app})
		put(hOwnerUID, at)
		at = len(b)
		b = strconv.AppendUint(b, uint64(o.gen), 10)
		put(hRestarts, at)
	case kReplicaSet:
		at = len(b)
		b = s.appendUID(b, c, kDeployment, &object{app: o.app})
		put(hOwnerUID, at)
	case kService:
		h := mix(s.seed, uint64(c.i), uint64(o.app), 0x5e7)
		at = len(b)
		b = fmt.Appendf(b, "172.20.%d.%d", h%256, 1+h>>8%253)
		put(hClusterIP, at)
	case kConfigMap:
		at = len(b)
		b = strconv.AppendUint(b, uint64(o.gen)+1, 10)
		put(hRevision, at)
	case kEvent:
		at = len(b)
		b = strconv.AppendUint(b, uint64(o.gen)+1, 10)
		put(hCount, at)
		at = len(b)
		b = time.UnixMicro(o.changed).UTC().AppendFormat(b, time.RFC3339)
		put(hLast, at)
		at = len(b)
		b = s.eventAbout(b, c, o)
		put(hAboutName, at)
		at = len(b)
		b = s.eventAboutUID(b, c, o)
		put(hAboutUID, at)
	case kWidget, kGadget:
		at = len(b)
		b = append(append(append(b, kinds[k].group...), '/'), c.served[k]...)
		put(hAPIVersion, at)
	}
	r.scratch = b
	r.out = st.fill(r.out[:0], &r.values)
	return r.out, nil
}
