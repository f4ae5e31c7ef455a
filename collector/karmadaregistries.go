package collector

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// registryObjects is the resource the ResourceRegistry objects of a Karmada control plane are read
// from (Options.KarmadaRegistries): kubesearch's store of them, which the query API serves under
// Karmada's own search.karmada.io/v1alpha1 (see registry.StoreGroup for why not there).
var registryObjects = schema.GroupVersionResource{Group: registry.StoreGroup, Version: registry.StoreVersion, Resource: registry.StoreResource}

// ConditionAccepted is the condition the collector writes into each ResourceRegistry object's
// status: whether what it selects is collected, and if not, why (naming the field).
const ConditionAccepted = "Accepted"

// Reasons of ConditionAccepted.
const (
	reasonAccepted = "Accepted"
	reasonInvalid  = "Invalid"
)

// karmadaRegistries reads the ResourceRegistry objects of a Karmada control plane and writes their
// status.
//
// Each reload check lists them, as karmadaMembers lists the Cluster objects: one read of the control
// plane is one consistent view of both for the plan. A watch beside it (watch) only says when to
// check, so that creating, editing or deleting an object acts within a second or two rather than at
// the next ReloadInterval tick; losing the watch costs that latency and nothing else.
type karmadaRegistries struct {
	source string // the kubeconfig, for errors
	client dynamic.NamespaceableResourceInterface
	log    *slog.Logger
	// pruned: the control plane dropped the last status.admitted written (a CRD from before it), so
	// a record alone is not written again at every check, only beside a condition. report's only.
	pruned bool
}

func newKarmadaRegistries(kubeconfig string, cfg *rest.Config, log *slog.Logger) (*karmadaRegistries, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: %w", kubeconfig, err)
	}
	return &karmadaRegistries{source: kubeconfig, client: dyn.Resource(registryObjects), log: log}, nil
}

// registryObject is one ResourceRegistry object as read: decoded, or why it cannot be.
type registryObject struct {
	obj *unstructured.Unstructured
	reg registry.ResourceRegistry
	err error // the object does not decode; it is rejected with this
	// earlier is the generation before this one that the status records as admitted
	// (status.admitted, admittedOf), to stand in for the object when it is refused; nil when the
	// status records none, or the current generation. ignored says why a record is not used.
	earlier *registry.AdmittedGeneration
	ignored error
}

// read lists the objects. Only a failure to read the control plane is an error, so that an
// unreachable control plane keeps the current registries rather than purging them all; an object
// that does not decode is returned with its error, to be rejected on its own.
func (k *karmadaRegistries) read(ctx context.Context) ([]registryObject, error) {
	list, err := k.client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("--karmada-registries: the control plane of --karmada-kubeconfig %s does not serve %s: install its CRD there (kubectl apply -f deploy/karmada/): %w",
			k.source, registryObjects.GroupResource(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: list %s: %w", k.source, registryObjects.GroupResource(), err)
	}
	out := make([]registryObject, 0, len(list.Items))
	for i := range list.Items {
		obj := &list.Items[i]
		o := registryObject{obj: obj}
		// Without its status: anyone who may write the status alone could otherwise make the object
		// undecodable with a status the control plane takes and kubesearch's types do not (a
		// lastTransitionTime in lower case), and so refused and its documents purged. Of the status
		// only status.admitted is read, on its own (admittedOf).
		spec := make(map[string]any, len(obj.Object))
		for key, v := range obj.Object {
			if key != "status" {
				spec[key] = v
			}
		}
		data, err := json.Marshal(spec)
		if err == nil {
			o.reg, err = registry.FromObject(data, "ResourceRegistry "+obj.GetName())
		}
		if err != nil {
			o.reg = registry.ResourceRegistry{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), UID: obj.GetUID(),
				CreationTimestamp: obj.GetCreationTimestamp(), Generation: obj.GetGeneration()}}
			o.err = err
		}
		o.earlier, o.ignored = admittedOf(obj)
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b registryObject) int { return strings.Compare(a.obj.GetName(), b.obj.GetName()) })
	return out, nil
}

// statusAdmitted is where in an object's status the collector records the generation it collects
// (registry.AdmittedGeneration): kubesearch's extension of Karmada's status, which has conditions
// only.
const statusAdmitted = "admitted"

// admittedOf reads the earlier generation an object's status records as admitted: nil without a
// record or with one of the current generation (the record of an admitted object); an error, and
// nil, for a record that cannot stand in for the object: one that does not decode (strictly, as
// the spec), was written for another uid (a status restored or copied onto an object deleted and
// created again), or claims a generation the object has not reached. Whoever may write the status
// may write this record: it is only ever a candidate, judged by registry.Admit as the spec is.
func admittedOf(obj *unstructured.Unstructured) (*registry.AdmittedGeneration, error) {
	status, _ := obj.Object["status"].(map[string]any)
	raw, ok := status[statusAdmitted]
	if !ok {
		return nil, nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("status.%s: %w", statusAdmitted, err)
	}
	a, err := registry.DecodeAdmitted(data, "status."+statusAdmitted)
	switch {
	case err != nil:
		return nil, err
	case a.UID != obj.GetUID():
		return nil, fmt.Errorf("status.%s: recorded for uid %q, not this object's %q (a status restored or copied onto an object created again)",
			statusAdmitted, a.UID, obj.GetUID())
	case a.Generation == obj.GetGeneration():
		return nil, nil
	case a.Generation > obj.GetGeneration() || a.Generation < 1:
		return nil, fmt.Errorf("status.%s: generation %d, which the object (generation %d) has not had",
			statusAdmitted, a.Generation, obj.GetGeneration())
	}
	return &a, nil
}

// warnIgnored logs the status.admitted records that could have stood in for a refused object and
// were not used (admittedOf says why). An admitted object's record is no matter: report replaces it.
func (k *karmadaRegistries) warnIgnored(objs []registryObject, verdicts map[string]verdict) {
	for _, o := range objs {
		if v := verdicts[o.obj.GetName()]; o.ignored != nil && v.condition.Status != metav1.ConditionTrue {
			k.log.Warn("ResourceRegistry status."+statusAdmitted+" ignored: the earlier generation it records is not collected",
				"registry", o.obj.GetName(), "uid", o.obj.GetUID(), "err", o.ignored)
		}
	}
}

// admittedDigest is d (digestRegistryObjects and the rest of a check's reads) with, for each object
// a plan (verdicts) refuses as it is, its status.admitted as read: such a record decides what is
// collected (admitObjects), and whether an object is refused changes only with what d covers, so a
// record written for an admitted object (every admission writes one) is no change, while one
// planted in, or written by another replica into, a refused object's status is. The digest in
// force is taken with the verdicts of its own plan, and each check's with those same verdicts.
func admittedDigest(d [32]byte, objs []registryObject, verdicts map[string]verdict) [32]byte {
	h := sha256.New()
	h.Write(d[:])
	for _, o := range objs {
		v, ok := verdicts[o.obj.GetName()]
		if ok && v.uid == string(o.obj.GetUID()) && v.generation == o.obj.GetGeneration() && v.condition.Status == metav1.ConditionTrue {
			continue
		}
		status, _ := o.obj.Object["status"].(map[string]any)
		data, err := json.Marshal(status[statusAdmitted])
		if err != nil {
			data = []byte(time.Now().String()) // cannot happen for JSON read; a change every time rather than never
		}
		fmt.Fprintf(h, "%s\x00%s\x00", o.obj.GetUID(), data)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// digest hashes what the plan is built from (registry.SpecDigest), so writing a status is not a change.
func digestRegistryObjects(objs []registryObject, h io.Writer) {
	for _, o := range objs {
		if o.err != nil {
			fmt.Fprintf(h, "undecodable\x00%s\x00%s\x00%d\x00", o.obj.GetName(), o.obj.GetUID(), o.obj.GetGeneration())
			continue
		}
		d, err := registry.SpecDigest(o.reg)
		if err != nil {
			// Cannot happen for a decoded object; count it as a change every time rather than never.
			d = []byte(time.Now().String())
		}
		fmt.Fprintf(h, "registry\x00%s\x00", d)
	}
}

// verdict is what the last plan made of one object: the condition its status should hold, and
// what of it is collected.
type verdict struct {
	uid        string
	generation int64
	condition  metav1.Condition
	// inEffect is the version of the object the plan collects: the object as read, an earlier
	// generation admitted before (when the object as read is refused), or nil. Its generation and
	// spec are what status.admitted records.
	inEffect *registry.ResourceRegistry
}

// admitObjects admits the decodable objects beside the files' registries (registry.Admit) and
// returns them with each object's verdict, by name. An object refused as it is now, of which an
// earlier generation was admitted, keeps that generation in effect, as an invalid edit of a file
// keeps the file's last valid content: a mistake in an edit does not purge what was collected.
//
// That earlier generation is the one its status records (status.admitted, read into
// registryObject.earlier), so that every collector reading the object — restarted, or another
// replica under a lease — keeps the same generation in effect and writes the same condition. last
// (by uid, what this process's plan in force collects) is a cache that only bridges a record not
// written yet (a write lost to a conflict): it is used when it holds a newer generation than the
// status, and is then written there. Either is judged by registry.Admit again, as any candidate is.
func admitObjects(files []registry.ResourceRegistry, objs []registryObject, clusters []registry.Cluster,
	last map[types.UID]registry.ResourceRegistry) ([]registry.ResourceRegistry, map[string]verdict) {
	fallbacks := map[string]registry.ResourceRegistry{} // by name, of the objects refused as they are
	candidates := func() []registry.ResourceRegistry {
		var out []registry.ResourceRegistry
		for _, o := range objs {
			if prev, ok := fallbacks[o.obj.GetName()]; ok {
				out = append(out, prev)
			} else if o.err == nil {
				out = append(out, o.reg)
			}
		}
		return out
	}
	refused := func(o registryObject, rejected map[string]error) error {
		if o.err != nil {
			return o.err
		}
		return rejected[o.obj.GetName()]
	}
	admitted, rejected := registry.Admit(files, candidates(), clusters)
	// Second pass: the refused objects with an earlier admitted generation take it back.
	why := map[string]error{}
	for _, o := range objs {
		if err := refused(o, rejected); err != nil {
			why[o.obj.GetName()] = err
			if prev, ok := earlierGeneration(o, last[o.obj.GetUID()]); ok {
				fallbacks[o.obj.GetName()] = prev
			}
		}
	}
	if len(fallbacks) > 0 {
		admitted, rejected = registry.Admit(files, candidates(), clusters)
	}
	inEffect := map[string]*registry.ResourceRegistry{}
	for i := range admitted {
		inEffect[admitted[i].Name] = &admitted[i]
	}

	verdicts := map[string]verdict{}
	for _, o := range objs {
		name := o.obj.GetName()
		v := verdict{uid: string(o.obj.GetUID()), generation: o.obj.GetGeneration(), inEffect: inEffect[name]}
		err := why[name]
		if err == nil {
			err = rejected[name] // admitted alone in the first pass, refused beside the fallbacks
		}
		prev, fellBack := fallbacks[name]
		switch {
		case err == nil:
			v.condition = metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: reasonAccepted}
		case v.inEffect != nil && v.inEffect.Generation != v.generation:
			v.condition = metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionFalse, Reason: reasonInvalid,
				Message: fmt.Sprintf("generation %d not collected: %s; generation %d, admitted before, is collected still",
					v.generation, oneLine(err), v.inEffect.Generation)}
		case fellBack && rejected[name] != nil:
			v.condition = metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionFalse, Reason: reasonInvalid,
				Message: fmt.Sprintf("generation %d not collected: %s; generation %d, admitted before, is not collected either: %s",
					v.generation, oneLine(err), prev.Generation, oneLine(rejected[name]))}
		default:
			v.condition = metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionFalse, Reason: reasonInvalid,
				Message: "not collected: " + oneLine(err)}
		}
		v.condition.Message = conditionMessage(v.condition.Message)
		v.condition.ObservedGeneration = v.generation
		verdicts[name] = v
	}
	return admitted, verdicts
}

// earlierGeneration is the version of o that stands in for it while it is refused: the object as
// it is now (name, uid, creation time, annotations: none of them is part of a generation, and
// none is for a status writer to choose) with the generation and spec its status records as
// admitted, or those of remembered when it is newer (a record not written yet).
func earlierGeneration(o registryObject, remembered registry.ResourceRegistry) (registry.ResourceRegistry, bool) {
	var gen int64
	var spec registry.ResourceRegistrySpec
	if o.earlier != nil {
		gen, spec = o.earlier.Generation, o.earlier.Spec
	}
	if remembered.UID == o.obj.GetUID() && remembered.Generation > gen && remembered.Generation < o.obj.GetGeneration() {
		gen, spec = remembered.Generation, remembered.Spec
	}
	if gen == 0 {
		return registry.ResourceRegistry{}, false
	}
	return registry.ResourceRegistry{
		TypeMeta: metav1.TypeMeta{APIVersion: registry.APIVersion, Kind: registry.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: o.obj.GetName(), UID: o.obj.GetUID(), CreationTimestamp: o.obj.GetCreationTimestamp(),
			Generation: gen, Annotations: o.obj.GetAnnotations()},
		Spec: spec,
	}, true
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// remember keeps the versions the applied plan collects, for admitObjects' next call.
func remember(verdicts map[string]verdict) map[types.UID]registry.ResourceRegistry {
	last := map[types.UID]registry.ResourceRegistry{}
	for _, v := range verdicts {
		if v.inEffect != nil {
			last[types.UID(v.uid)] = *v.inEffect
		}
	}
	return last
}

// describeAdmitted fills the message of each admitted object's condition from the plan: which
// members it selects resources of.
func describeAdmitted(verdicts map[string]verdict, plan registry.Plan) {
	accounts := registry.DescribeAll(plan)
	for name, v := range verdicts {
		if v.condition.Status == metav1.ConditionTrue {
			account, ok := accounts[name]
			if !ok {
				account = registry.Describe(name, registry.Plan{})
			}
			v.condition.Message = conditionMessage(account)
			verdicts[name] = v
		}
	}
}

// conditionMessage bounds a message to what a Condition may hold (32 KiB), cut at a character's
// boundary and valid UTF-8 throughout: the control plane stores the status as JSON, where a broken
// character reads back as U+FFFD, and a message that does not read back as written differs from the
// verdict at every check, so would be written again at each (every write a watch event, every
// event a check).
func conditionMessage(s string) string {
	const most = 32 << 10
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= most {
		return s
	}
	cut := most - len(" ...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " ..."
}

// report writes each object's verdict into its status where the status says otherwise — the
// condition, and the generation collected (status.admitted) — in one write: after every plan
// change, and at every check (so a status someone cleared, or a write that failed, is written
// again). Objects changed since the plan (another generation or uid) wait for the next plan. Several
// collectors reading the same registries (replicas under a lease) compute the same verdicts from
// the same statuses, so they do not fight over them; a conflict is left to the next check. Errors
// are logged, never fatal: the plan in force is what collects, and a record not written is written
// at the next check.
func (k *karmadaRegistries) report(ctx context.Context, objs []registryObject, verdicts map[string]verdict) {
	for _, o := range objs {
		v, ok := verdicts[o.obj.GetName()]
		if !ok || v.uid != string(o.obj.GetUID()) || v.generation != o.obj.GetGeneration() {
			continue
		}
		raw, _, _ := unstructured.NestedSlice(o.obj.Object, "status", "conditions")
		conds, changed := withAccepted(raw, v.condition, time.Now())
		record, recordChanged, err := withAdmitted(o.obj, v)
		if err != nil {
			k.log.Warn("ResourceRegistry status not written", "registry", o.obj.GetName(), "err", err)
			continue
		}
		if !changed && (!recordChanged || k.pruned) {
			continue
		}
		obj := o.obj.DeepCopy()
		if err := unstructured.SetNestedSlice(obj.Object, conds, "status", "conditions"); err != nil {
			k.log.Warn("ResourceRegistry status not written", "registry", o.obj.GetName(), "err", err)
			continue
		}
		if recordChanged {
			if err := unstructured.SetNestedField(obj.Object, record, "status", statusAdmitted); err != nil {
				k.log.Warn("ResourceRegistry status not written", "registry", o.obj.GetName(), "err", err)
				continue
			}
		}
		written, err := k.client.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: "kubesearch-collector"})
		switch {
		case err == nil && recordChanged:
			_, kept, _ := unstructured.NestedFieldNoCopy(written.Object, "status", statusAdmitted)
			if !kept && !k.pruned {
				k.log.Warn("the control plane drops status."+statusAdmitted+" (its ResourceRegistry CRD predates it): a restarted collector or another replica will not keep a refused object's earlier generation; apply deploy/karmada/ there",
					"registry", o.obj.GetName())
			}
			k.pruned = !kept
			fallthrough
		case err == nil:
			k.log.Info("ResourceRegistry status written", "registry", o.obj.GetName(), "accepted", v.condition.Status, "message", v.condition.Message,
				"collected", collectedGeneration(v))
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			// Changed or deleted since the list: the watch brings the next check.
		default:
			k.log.Warn("ResourceRegistry status not written (the collector needs update on resourceregistries/status)",
				"registry", o.obj.GetName(), "err", err)
		}
	}
}

// collectedGeneration is the generation of the object v collects, 0 for none.
func collectedGeneration(v verdict) int64 {
	if v.inEffect == nil {
		return 0
	}
	return v.inEffect.Generation
}

// withAdmitted is the status.admitted record of the version v collects (registry.AdmittedGeneration,
// as JSON values), and whether the object's status holds another. Nothing is collected, nothing to
// record: a record there is left as it is (it is not used while it is refused), so that the
// generation it names comes back once what refuses it beside the others (a conflict) is gone.
func withAdmitted(obj *unstructured.Unstructured, v verdict) (map[string]any, bool, error) {
	if v.inEffect == nil {
		return nil, false, nil
	}
	data, err := json.Marshal(registry.AdmittedGeneration{UID: types.UID(v.uid), Generation: v.inEffect.Generation, Spec: v.inEffect.Spec})
	if err != nil {
		return nil, false, fmt.Errorf("status.%s: %w", statusAdmitted, err)
	}
	var record map[string]any
	if err := json.Unmarshal(data, &record); err != nil {
		return nil, false, fmt.Errorf("status.%s: %w", statusAdmitted, err)
	}
	record["generation"] = v.inEffect.Generation // an integer, not the float64 of Unmarshal
	// Compared as JSON (keys sorted), as the control plane stores it: a record read back that
	// differed from the one written would be written again at every check.
	want, err := json.Marshal(record)
	if err != nil {
		return nil, false, fmt.Errorf("status.%s: %w", statusAdmitted, err)
	}
	status, _ := obj.Object["status"].(map[string]any)
	if held, err := json.Marshal(status[statusAdmitted]); err == nil && bytes.Equal(held, want) {
		return nil, false, nil
	}
	return record, true, nil
}

// withAccepted is the conditions raw with the Accepted entry set to want, and whether that changed
// anything. Only that entry is read and written: conditions of other writers pass as they are, also
// ones metav1.Condition would not decode, so that none of them can keep ours from being written.
// lastTransitionTime moves only when the status flips, as meta.SetStatusCondition does.
func withAccepted(raw []any, want metav1.Condition, now time.Time) ([]any, bool) {
	at := -1
	for i, c := range raw {
		if m, ok := c.(map[string]any); ok && m["type"] == want.Type {
			at = i
			break
		}
	}
	entry := map[string]any{
		"type": want.Type, "status": string(want.Status), "reason": want.Reason, "message": want.Message,
		"observedGeneration": want.ObservedGeneration,
		"lastTransitionTime": now.UTC().Format(time.RFC3339),
	}
	if at < 0 {
		return append(slices.Clone(raw), entry), true
	}
	old, _ := raw[at].(map[string]any)
	gen, _ := old["observedGeneration"].(int64)
	if f, ok := old["observedGeneration"].(float64); ok {
		gen = int64(f)
	}
	if old["status"] == entry["status"] && old["reason"] == want.Reason && old["message"] == want.Message && gen == want.ObservedGeneration {
		return raw, false
	}
	if t, ok := old["lastTransitionTime"].(string); ok && old["status"] == entry["status"] {
		entry["lastTransitionTime"] = t
	}
	out := slices.Clone(raw)
	out[at] = entry
	return out, true
}

// watch signals changed whenever a ResourceRegistry object changes, until ctx ends. It resumes from
// the last resourceVersion it saw, starts over from now on a 410, and backs off while the control
// plane is away (the reload ticker covers that time).
func (k *karmadaRegistries) watch(ctx context.Context, changed chan<- struct{}) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default: // a check is pending already
		}
	}
	var rv string
	seen := seenObjects{}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 6, Cap: 30 * time.Second}
	delay := backoff
	for ctx.Err() == nil {
		w, err := k.client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				k.log.Debug("watching ResourceRegistry objects failed; retrying", "err", err)
			}
			sleepCtx(ctx, delay.Step())
			continue
		}
		delay = backoff
		rv = k.drain(ctx, w, rv, seen, signal)
	}
}

// drain reads one watch until it ends, signalling every change of what is collected (seen); it
// returns where to resume.
func (k *karmadaRegistries) drain(ctx context.Context, w watch.Interface, rv string, seen seenObjects, signal func()) string {
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			ev = e
		}
		switch ev.Type {
		case watch.Error:
			if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired) {
				// Compacted past rv: start from now, and check once, since changes may be lost.
				signal()
				return ""
			}
			k.log.Debug("watch of ResourceRegistry objects ended", "err", apierrors.FromObject(ev.Object))
			return rv
		case watch.Bookmark:
		default:
			if seen.changes(ev) {
				signal()
			}
		}
		if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
			rv = m.GetResourceVersion()
		}
	}
}

// seenObjects is, by uid, what of each object decides what is collected besides its spec (whose
// every change is a new generation): the generation and the Secret data annotation
// (registry.SpecDigest). A status written is no change: without this, every status a collector
// writes is a full check of the control plane (the Cluster objects and a Secret per member) for
// every collector watching, and replicas whose conditions differ would answer each other's
// writes at once, forever. A status.admitted another replica writes into a refused object's
// status (from its memory: admitObjects) is no signal either: the next --reload-interval check
// reads it, and the replicas' conditions agree from then on.
type seenObjects map[types.UID]string

// changes says whether ev may change what is collected, and remembers the object.
func (s seenObjects) changes(ev watch.Event) bool {
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return true
	}
	if ev.Type == watch.Deleted {
		delete(s, m.GetUID())
		return true
	}
	key := fmt.Sprintf("%d\x00%s", m.GetGeneration(), m.GetAnnotations()[registry.SecretDataAnnotation])
	if prev, ok := s[m.GetUID()]; ok && prev == key && ev.Type == watch.Modified {
		return false
	}
	s[m.GetUID()] = key
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
