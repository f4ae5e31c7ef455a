package registry

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Admit takes ResourceRegistry objects read from an API server (a Karmada control plane), where each
// object stands on its own: unlike a file, whose every error keeps the whole configuration as it was,
// one invalid object must not hold back the others, nor a later one unseat an earlier one. fixed are
// registries always in (the --registry files, valid as a set already). The objects are tried oldest
// first (creation time, then name), and each is admitted when it is valid on its own and the set with
// it still is: no kind in two API groups, no two OpenSearch backends, Secret selections agreeing
// about their data in every cluster. rejected holds, by object name, why each other one is not.
// planFor is NewPlan, through a variable so that tests count the plans Admit makes: a plan covers
// every cluster, so their number is what grows with the fleet.
var planFor = NewPlan

func Admit(fixed, objects []ResourceRegistry, clusters []Cluster) (admitted []ResourceRegistry, rejected map[string]error) {
	objects = slices.Clone(objects)
	slices.SortStableFunc(objects, func(a, b ResourceRegistry) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	rejected = map[string]error{}
	// Usually every object is fine: one check of the whole set, rather than one plan per object
	// (a plan covers every cluster: 100 registries of 1,000 clusters would be 100 plans of 1,000).
	if admissibleSet(append(slices.Clone(fixed), objects...), clusters) == nil {
		return objects, rejected
	}
	// Then the checks that need no plan, object by object, and one plan of what passes them: an
	// object invalid on its own or conflicting in its fields (a typo, a kind in two groups, another
	// backend) costs no plan. When that plan fails, the first object whose addition fails it is
	// found by halving (a subset of a set that plans plans too), refused, and the objects after it
	// judged again without it: a few plans per such object rather than a plan per object over the
	// whole fleet (300 registries of 1,000 clusters: minutes with the collector's lock held). The
	// verdicts are those of judging each object in turn against what was admitted before it.
	if _, err := planFor(fixed, clusters); err != nil {
		// Cannot happen for files valid as a set; judged one by one, every object is refused.
		set := slices.Clone(fixed)
		for _, r := range objects {
			if err := admissible(set, r, clusters); err != nil {
				rejected[r.Name] = err
				continue
			}
			set = append(set, r)
			admitted = append(admitted, r)
		}
		return admitted, rejected
	}
	set := slices.Clone(fixed) // admitted so far, and planning
	for next := 0; next < len(objects); {
		with := slices.Clone(set)
		var passed []int // indices into objects
		cheap := map[int]error{}
		for i := next; i < len(objects); i++ {
			if err := admissibleUnplanned(with, objects[i]); err != nil {
				cheap[i] = err
				continue
			}
			with = append(with, objects[i])
			passed = append(passed, i)
		}
		keep := func(upTo int) { // the verdicts on objects[next:upTo] are final
			for i := next; i < upTo; i++ {
				if err, ok := cheap[i]; ok {
					rejected[objects[i].Name] = err
					continue
				}
				set = append(set, objects[i])
				admitted = append(admitted, objects[i])
			}
		}
		_, err := planFor(with, clusters)
		if err == nil {
			keep(len(objects))
			break
		}
		// set plans, set with every passed object does not: the first passed object that fails it.
		lo, hi := 0, len(passed)
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if _, err := planFor(append(slices.Clip(set), with[len(set):len(set)+mid]...), clusters); err != nil {
				hi = mid
			} else {
				lo = mid
			}
		}
		culprit := passed[hi-1]
		// Its refusal as judging it in turn says it: the plan of what is admitted before it, with it.
		_, err = planFor(append(slices.Clip(set), with[len(set):len(set)+hi]...), clusters)
		keep(culprit)
		rejected[objects[culprit].Name] = err
		next = culprit + 1
	}
	return admitted, rejected
}

// admissibleSet says whether every registry of set is valid and the set plans.
func admissibleSet(set []ResourceRegistry, clusters []Cluster) error {
	if err := Validate(set); err != nil {
		return err
	}
	if _, err := OpenSearchBackend(set); err != nil {
		return err
	}
	_, err := planFor(set, clusters)
	return err
}

// admissible says why r may not join set, or nil.
func admissible(set []ResourceRegistry, r ResourceRegistry, clusters []Cluster) error {
	if err := admissibleUnplanned(set, r); err != nil {
		return err
	}
	if _, err := planFor(append(slices.Clip(set), r), clusters); err != nil {
		return err
	}
	return nil
}

// admissibleUnplanned is admissible without the plan: r on its own, and the set's fields with it.
func admissibleUnplanned(set []ResourceRegistry, r ResourceRegistry) error {
	if errs := ValidateRegistry(&r); len(errs) > 0 {
		return errs.ToAggregate()
	}
	with := append(slices.Clip(set), r)
	if err := Validate(with); err != nil {
		// Validate names every registry's problems; only those of r (the set was valid without it)
		// or a duplicate name of r's.
		return onlyOf(err, r.Name)
	}
	if _, err := OpenSearchBackend(with); err != nil {
		return err
	}
	return nil
}

// onlyOf keeps the field errors of the registry named name, or err when it holds none of them.
func onlyOf(err error, name string) error {
	var kept []error
	for _, e := range unjoin(err) {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Registry != name {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		return err
	}
	return errors.Join(kept...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// FromObject decodes a ResourceRegistry from the JSON of an API object of any apiVersion holding
// Karmada's schema (karmada.kubesearch.io's store, or search.karmada.io itself): strictly, as a file
// is, so a field kubesearch does not know is an error rather than ignored. The result carries
// Karmada's apiVersion and kind.
func FromObject(data []byte, source string) (ResourceRegistry, error) {
	var r ResourceRegistry
	if err := decodeStrict(data, &r, source); err != nil {
		return ResourceRegistry{}, err
	}
	r.APIVersion, r.Kind = APIVersion, Kind
	return r, nil
}

// DecodeAdmitted decodes an AdmittedGeneration from JSON (an object's status.admitted), strictly, as
// FromObject decodes the spec: whoever may write the status may write anything there.
func DecodeAdmitted(data []byte, source string) (AdmittedGeneration, error) {
	var a AdmittedGeneration
	if err := decodeStrict(data, &a, source); err != nil {
		return AdmittedGeneration{}, err
	}
	return a, nil
}

// SpecDigest is what of a registry object decides what is collected, for telling whether a reload has
// anything to do: name, uid, creation time (Admit's order), the Secret data annotation and the spec.
// Status and the rest of metadata are left out, so writing a status does not count as a change.
func SpecDigest(r ResourceRegistry) ([]byte, error) {
	return json.Marshal(struct {
		Name, UID, Created, SecretData string
		Spec                           ResourceRegistrySpec
	}{r.Name, string(r.UID), r.CreationTimestamp.UTC().String(), r.Annotations[SecretDataAnnotation], r.Spec})
}

// Describe is a short account of an admission for a status message.
func Describe(name string, plan Plan) string {
	return describe(clustersOf(plan)[name])
}

// DescribeAll is Describe of every registry the plan collects from, in one pass over the plan
// (Describe of each, one pass apiece, is registries × clusters × selections: seconds for hundreds of
// registries of 1,000 clusters). A registry the plan does not name selects no member's resources.
func DescribeAll(plan Plan) map[string]string {
	in := clustersOf(plan)
	out := make(map[string]string, len(in))
	for r, clusters := range in {
		out[r] = describe(clusters)
	}
	return out
}

// clustersOf is, by registry, the clusters whose selections come from it, in plan order.
func clustersOf(plan Plan) map[string][]string {
	in := map[string][]string{}
	for _, c := range plan.Clusters {
		var named []string // the registries this cluster's selections come from, once each
		for _, s := range c.Selections {
			for _, src := range s.Sources {
				if !slices.Contains(named, src.Registry) {
					named = append(named, src.Registry)
				}
			}
		}
		for _, r := range named {
			in[r] = append(in[r], c.Cluster.Name)
		}
	}
	return in
}

// describe is the account of a registry selecting resources of the clusters in, in plan order.
func describe(in []string) string {
	if len(in) == 0 {
		return "selects no member cluster's resources"
	}
	const shown = 10
	msg := fmt.Sprintf("selects resources of %d member clusters: ", len(in))
	if len(in) == 1 {
		msg = "selects resources of 1 member cluster: "
	}
	for i, c := range in[:min(shown, len(in))] {
		if i > 0 {
			msg += ", "
		}
		msg += c
	}
	if len(in) > shown {
		msg += fmt.Sprintf(" and %d more", len(in)-shown)
	}
	return msg
}
