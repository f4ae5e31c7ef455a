package osstore

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendBulkGolden(t *testing.T) {
	doc := []byte(`{"uid":"u1","epoch":7,"resourceVersion":42,"object":{"metadata":{"name":"web"}}}`)
	batch := []*op{
		{action: actionIndex, index: "kubernetes-pod", id: "u1", doc: doc, versioned: true, version: 42, requireAlias: true},
		{action: actionIndex, index: "kubernetes-apiservice", id: "u2", doc: []byte(`{"uid":"u2"}`)}, // resourceVersion not an integer
		{action: actionDelete, index: "kubernetes-pod", id: "u3", versioned: true, version: 43, requireAlias: true},
		{action: actionIndex, index: "team1-kubernetes-pod", id: "u4", doc: doc, cas: true, seqNo: 17, primaryTerm: 2, requireAlias: true},
		{action: actionDelete, index: "kubernetes-pod", id: "u5", cas: true, seqNo: 0, primaryTerm: 1},
		{action: actionIndex, index: "kubernetes-pod", id: `odd"id\`, doc: doc, versioned: true, version: 0},
	}
	got := appendBulk(nil, batch)

	// Every line is JSON, and the body ends with a line break, as _bulk requires.
	if !bytes.HasSuffix(got, []byte("\n")) {
		t.Error("body does not end with a line break")
	}
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) != 10 {
		t.Errorf("got %d lines, want 10 (4 index ops with a document, 2 deletes)", len(lines))
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("line %d is not JSON: %s", i+1, l)
		}
	}
	if n := bulkSize(batch); n < len(got) {
		t.Errorf("bulkSize %d underestimates the body (%d bytes)", n, len(got))
	}
	checkGolden(t, "bulk", got)
}

func TestClassify(t *testing.T) {
	tests := []struct {
		action action
		result itemResult
		want   outcome
	}{
		{actionIndex, itemResult{status: 201}, outcomeDone},
		{actionIndex, itemResult{status: 200}, outcomeDone},
		{actionDelete, itemResult{status: 200}, outcomeDone},
		{actionDelete, itemResult{status: 404}, outcomeDone}, // not found: nothing to delete
		{actionDelete, itemResult{status: 404, errType: "index_not_found_exception"}, outcomeDone},
		{actionIndex, itemResult{status: 404, errType: "index_not_found_exception"}, outcomeMissingAlias},
		{actionIndex, itemResult{status: 409, errType: "version_conflict_engine_exception"}, outcomeConflict},
		{actionDelete, itemResult{status: 409, errType: "version_conflict_engine_exception"}, outcomeConflict},
		{actionIndex, itemResult{status: 429, errType: "es_rejected_execution_exception"}, outcomeRetry},
		{actionIndex, itemResult{status: 429, errType: "cluster_block_exception"}, outcomeRetry}, // disk watermark reached
		{actionIndex, itemResult{status: 500}, outcomeRetry},
		{actionIndex, itemResult{status: 503, errType: "unavailable_shards_exception"}, outcomeRetry},
		{actionIndex, itemResult{status: 400, errType: "mapper_parsing_exception"}, outcomePermanent},
		{actionIndex, itemResult{status: 400, errType: "illegal_argument_exception"}, outcomePermanent},
		{actionIndex, itemResult{status: 400, errType: "document_parsing_exception"}, outcomePermanent},
		// A write block (an index roll copying it, or set by hand) lifts again: no event is dead-lettered for it.
		{actionIndex, itemResult{status: 403, errType: "cluster_block_exception"}, outcomeRetry},
		{actionDelete, itemResult{status: 403, errType: "cluster_block_exception"}, outcomeRetry},
		{actionIndex, itemResult{status: 403, errType: "security_exception"}, outcomeRetry},
		{actionIndex, itemResult{status: 401, errType: "security_exception"}, outcomeRetry},
	}
	for _, tt := range tests {
		if got := classify(tt.action, tt.result); got != tt.want {
			t.Errorf("%s %d %s: got %s, want %s", tt.action, tt.result.status, tt.result.errType, got, tt.want)
		}
	}
}

func TestParseBulkResponse(t *testing.T) {
	// As OpenSearch 2.19 answers: one item per operation, in order, each keyed by its action.
	body := []byte(`{"took":30,"errors":true,"items":[
	{"index":{"_index":"kubernetes-pod-v1","_id":"u1","_version":42,"result":"created","_shards":{"total":1,"successful":1,"failed":0},"_seq_no":0,"_primary_term":1,"status":201}},
	{"delete":{"_index":"kubernetes-pod-v1","_id":"u3","_version":43,"result":"not_found","_shards":{"total":1,"successful":1,"failed":0},"_seq_no":1,"_primary_term":1,"status":404}},
	{"index":{"_index":"kubernetes-pod-v1","_id":"u4","status":409,"error":{"type":"version_conflict_engine_exception","reason":"[u4]: version conflict, current version [50] is higher than the one provided [42]","index":"kubernetes-pod-v1","shard":"0","index_uuid":"x"}}},
	{"index":{"_index":"kubernetes-pod-v1","_id":"u5","status":400,"error":{"type":"mapper_parsing_exception","reason":"failed to parse field [podIP] of type [ip]","caused_by":{"type":"illegal_argument_exception","reason":"'x' is not an IP string literal."}}}}
	]}`)
	got, err := parseBulkResponse(body, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []itemResult{
		{status: 201, version: 42},
		// A delete of a document that is not there still leaves a tombstone, and says its version.
		{status: 404, version: 43},
		{status: 409, errType: "version_conflict_engine_exception", reason: "[u4]: version conflict, current version [50] is higher than the one provided [42]"},
		{status: 400, errType: "mapper_parsing_exception", reason: "failed to parse field [podIP] of type [ip] (caused by illegal_argument_exception: 'x' is not an IP string literal.)"},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseBulkResponse(body, 5); err == nil {
		t.Error("an answer with fewer items than operations was accepted")
	}
}
