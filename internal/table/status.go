package table

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// member is one member of the narrowed object a Status cell is computed from: section.key, taken
// from the section's gjson path (which may project, as "#.{name}" does). A member with an empty
// key and path is its section whole, and then the section's only member.
type member struct{ section, key, path string }

// The members each kind's Status cell reads, no more. Printer.Status decodes only these: a Pod's
// containers carry env, ports and probes, its container statuses images and resources, that its
// status never reads, and decoding them is most of the cost. TestStatusIsTheAPIServersStatusCell
// holds every narrowed kind against kube-apiserver's own Status cells, so a cell that starts
// reading another member fails there.
var (
	podStatusMembers = []member{
		{"metadata", "deletionTimestamp", "deletionTimestamp"},
		{"spec", "containers", "containers.#.{name}"},
		{"spec", "initContainers", "initContainers.#.{name,restartPolicy}"},
		{"status", "phase", "phase"},
		{"status", "reason", "reason"},
		{"status", "conditions", "conditions"},
		{"status", "initContainerStatuses", "initContainerStatuses.#.{name,state,lastState,ready,started,restartCount}"},
		{"status", "containerStatuses", "containerStatuses.#.{name,state,lastState,ready,started,restartCount}"},
	}
	// podKeyMembers are what a Pod's keyed columns read (READY, RESTARTS, IP, NODE, NOMINATED
	// NODE, READINESS GATES): the Status cell's members and a few more, each section's together
	// (narrow writes a section once). TestSortKeysOfNarrowedObjects holds them against the
	// whole object's keys.
	podKeyMembers = []member{
		{"metadata", "deletionTimestamp", "deletionTimestamp"},
		{"spec", "containers", "containers.#.{name}"},
		{"spec", "initContainers", "initContainers.#.{name,restartPolicy}"},
		{"spec", "nodeName", "nodeName"},
		{"spec", "readinessGates", "readinessGates"},
		{"status", "phase", "phase"},
		{"status", "reason", "reason"},
		{"status", "conditions", "conditions"},
		{"status", "initContainerStatuses", "initContainerStatuses.#.{name,state,lastState,ready,started,restartCount}"},
		{"status", "containerStatuses", "containerStatuses.#.{name,state,lastState,ready,started,restartCount}"},
		{"status", "podIP", "podIP"},
		{"status", "podIPs", "podIPs"},
		{"status", "nominatedNodeName", "nominatedNodeName"},
	}
	nodeStatusMembers = []member{
		{"spec", "unschedulable", "unschedulable"},
		{"status", "conditions", "conditions"},
	}
	jobStatusMembers = []member{
		{"metadata", "deletionTimestamp", "deletionTimestamp"},
		{"status", "conditions", "conditions"},
	}
)

// narrow writes the object holding only members, grouped by section in the order given. Members
// the object lacks are left out. The object is scanned once; each section is searched in its own
// bytes.
func narrow(obj []byte, members []member) []byte {
	var sections [3]gjson.Result // metadata, spec, status
	// A view of obj's bytes, not a copy (a Pod is kilobytes, most of them its spec): it lives only
	// during this call, and what is kept of it is copied into the result.
	gjson.Parse(unsafe.String(unsafe.SliceData(obj), len(obj))).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "metadata":
			sections[0] = v
		case "spec":
			sections[1] = v
		case "status":
			sections[2] = v
		}
		return true
	})
	b := make([]byte, 0, 512)
	b = append(b, '{')
	section, open := "", false // the section being written; open: its brace is
	for _, m := range members {
		var sec gjson.Result
		switch m.section {
		case "metadata":
			sec = sections[0]
		case "spec":
			sec = sections[1]
		case "status":
			sec = sections[2]
		}
		v := sec
		if m.path != "" {
			v = sec.Get(m.path)
		}
		if !v.Exists() {
			continue
		}
		if m.section != section || !open {
			if open {
				b = append(b, '}')
				open = false
			}
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, m.section...)
			b = append(b, `":`...)
			section = m.section
			if m.key == "" {
				b = append(b, v.Raw...)
				continue
			}
			b = append(b, '{')
			open = true
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, `":`...)
		b = append(b, v.Raw...)
	}
	if open {
		b = append(b, '}')
	}
	return append(b, '}')
}
