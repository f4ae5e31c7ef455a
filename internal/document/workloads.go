package document

import "github.com/tidwall/gjson"

// replicas writes the replica counts; a missing status count is 0 (the API server omits zero
// counts), so sorts and ranges such as readyReplicas < replicas work on every document.
func (w *docWriter) replicas(desired, ready, available, updated gjson.Result, hasUpdated bool) {
	if desired.Type == gjson.Number {
		w.int(FieldReplicas, desired.Int())
	}
	w.int(FieldReadyReplicas, ready.Int())
	w.int(FieldAvailableReplicas, available.Int())
	if hasUpdated {
		w.int(FieldUpdatedReplicas, updated.Int())
	}
}
