package osstore

import (
	"errors"
	"testing"
)

func TestResponseError(t *testing.T) {
	notFound := []byte(`{"error":{"root_cause":[{"type":"index_not_found_exception","reason":"no such index [kubernetes-pod-v1]"}],"type":"index_not_found_exception"},"status":404}`)
	tests := []struct {
		name   string
		path   string
		status int
		body   []byte
		want   error
	}{
		{"expired PIT", "/_search", 404, []byte(`{"error":{"root_cause":[{"type":"search_context_missing_exception","reason":"No search context found for id [1]"}]},"status":404}`), ErrExpired},
		{"PIT of a deleted index (an index roll)", "/_search", 404, notFound, ErrExpired},
		{"a named index that is missing is no expiry", "/kubernetes-pod/_search", 404, notFound, nil},
		{"too many PITs", "/kubernetes-*/_search/point_in_time", 429, []byte(`{"error":{"type":"rejected_execution_exception","reason":"Trying to create too many Point In Time contexts"}}`), errTooManyPITs},
		{"overloaded", "/_search", 429, []byte(`{"error":{"type":"es_rejected_execution_exception"}}`), ErrUnavailable},
		{"refused query", "/_search", 400, []byte(`{"error":{"type":"parsing_exception"}}`), ErrRejected},
	}
	for _, tt := range tests {
		err := responseError("POST", tt.path, tt.status, tt.body)
		for _, sentinel := range []error{ErrExpired, errTooManyPITs, ErrUnavailable, ErrRejected} {
			if got := errors.Is(err, sentinel); got != (sentinel == tt.want) {
				t.Errorf("%s: errors.Is(%v, %v) = %v", tt.name, err, sentinel, got)
			}
		}
	}
}
