package osstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/mappings"
)

// ensureIndex implements docStore: the alias exists, or is created pointing to a new concrete index
// "<alias>-v<mappings.Version>" as its write index, so a mapping change can later roll the alias to a
// new index.
func (s *Store) ensureIndex(ctx context.Context, alias string) (indexState, error) {
	status, body, err := s.do(ctx, http.MethodGet, request{path: "/_alias/" + url.PathEscape(alias)})
	if err != nil {
		return indexState{}, err
	}
	switch status {
	case http.StatusOK:
		// {"<index>": {"aliases": {...}}, ...}
		st := indexState{alias: true}
		gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
			st.behind = append(st.behind, k.Str)
			return true
		})
		slices.Sort(st.behind)
		return st, nil
	case http.StatusNotFound:
	default:
		return indexState{}, responseError("GET", "/_alias/"+alias, status, body)
	}
	concrete := VersionedIndexName(alias)
	created := indexState{alias: true, behind: []string{concrete}}
	create, err := json.Marshal(map[string]any{"aliases": map[string]any{alias: map[string]any{"is_write_index": true}}})
	if err != nil {
		return indexState{}, err
	}
	status, body, err = s.do(ctx, http.MethodPut, request{path: "/" + url.PathEscape(concrete), body: create})
	if err != nil {
		return indexState{}, err
	}
	switch {
	case status == http.StatusOK:
		return created, nil
	case errorType(body) == "resource_already_exists_exception":
		// Created by another replica, or by hand without the alias: (re)attach it, idempotently.
		return created, s.addAlias(ctx, concrete, alias)
	case errorType(body) == "invalid_alias_name_exception":
		// A concrete index has the alias's name (auto-created by a write before the indexer managed
		// it, or made by an older version): keep writing to it.
		return indexState{}, nil
	default:
		return indexState{}, responseError("PUT", "/"+concrete, status, body)
	}
}

// VersionedIndexName is the concrete index behind an alias for this build's mapping version:
// "<alias>-v<mappings.Version>".
func VersionedIndexName(alias string) string {
	return alias + "-v" + strconv.Itoa(mappings.Version)
}

func (s *Store) addAlias(ctx context.Context, index, alias string) error {
	return s.aliasActions(ctx, map[string]any{"add": map[string]any{"index": index, "alias": alias, "is_write_index": true}})
}

// aliasActions applies alias actions in one atomic POST _aliases.
func (s *Store) aliasActions(ctx context.Context, actions ...map[string]any) error {
	body, err := json.Marshal(map[string]any{"actions": actions})
	if err != nil {
		return err
	}
	status, resp, err := s.do(ctx, http.MethodPost, request{path: "/_aliases", body: body})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return responseError("POST", "/_aliases", status, resp)
	}
	return nil
}

// Refresh makes everything written so far to the indices of kinds searchable. Kinds whose index
// does not exist yet are skipped.
func (s *Store) Refresh(ctx context.Context, kinds ...string) error {
	indices := make([]string, len(kinds))
	for i, k := range kinds {
		indices[i] = mappings.IndexName(s.index.Prefix, k)
	}
	return s.refresh(ctx, indices...)
}

// refresh makes everything written to indices searchable. Indices that do not exist are skipped.
func (s *Store) refresh(ctx context.Context, indices ...string) error {
	if len(indices) == 0 {
		return nil
	}
	path := "/" + url.PathEscape(strings.Join(indices, ",")) + "/_refresh"
	q := url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}
	status, body, err := s.do(ctx, http.MethodPost, request{path: path, query: q})
	if err != nil {
		return err
	}
	if status != http.StatusOK && errorType(body) != "index_not_found_exception" {
		return responseError("POST", path, status, body)
	}
	return nil
}

// installTemplate puts the index template when none is installed, when the installed one is of an
// older mappings.Version, or when it is of this version with other index settings (shards, replicas,
// refresh interval). A template of a newer version belongs to a newer indexer and is left alone.
func (s *Store) installTemplate(ctx context.Context, opts mappings.Options) (string, error) {
	name := mappings.TemplateName(opts.Prefix)
	path := "/_index_template/" + url.PathEscape(name)
	body, err := mappings.IndexTemplate(opts)
	if err != nil {
		return "", err
	}
	status, resp, err := s.do(ctx, http.MethodGet, request{path: path})
	if err != nil {
		return "", err
	}
	switch status {
	case http.StatusOK:
		installed := gjson.GetBytes(resp, "index_templates.0.index_template")
		v := installed.Get("version")
		switch {
		case v.Exists() && v.Int() > mappings.Version:
			return fmt.Sprintf("a newer template (version %d) is installed; left as is", v.Int()), nil
		case v.Exists() && v.Int() == mappings.Version && sameSettings(installed.Get("template.settings.index"), gjson.GetBytes(body, "template.settings.index")):
			return "", nil
		}
	case http.StatusNotFound:
	default:
		return "", responseError("GET", path, status, resp)
	}
	status, resp, err = s.do(ctx, http.MethodPut, request{path: path, body: body})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", responseError("PUT", path, status, resp)
	}
	return fmt.Sprintf("template %s version %d installed", name, mappings.Version), nil
}

// sameSettings compares the index settings the indexer controls. OpenSearch answers every setting
// as a string.
func sameSettings(installed, want gjson.Result) bool {
	for _, k := range []string{"number_of_shards", "number_of_replicas", "auto_expand_replicas", "refresh_interval"} {
		if installed.Get(k).String() != want.Get(k).String() {
			return false
		}
	}
	return true
}

// ping checks that OpenSearch answers at all.
func (s *Store) ping(ctx context.Context) error {
	status, body, err := s.do(ctx, http.MethodGet, request{path: "/"})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return responseError("GET", "/", status, body)
	}
	return nil
}

// createIndex creates an index with a body; an index that exists already is fine.
func (s *Store) createIndex(ctx context.Context, index string, body []byte) error {
	status, resp, err := s.do(ctx, http.MethodPut, request{path: "/" + url.PathEscape(index), body: body})
	if err != nil {
		return err
	}
	if status == http.StatusOK || errorType(resp) == "resource_already_exists_exception" {
		return nil
	}
	return responseError("PUT", "/"+index, status, resp)
}
