package collector

import (
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"k8s.io/client-go/openapi"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// The query API never talks to members, yet `kubectl explain` and `kubectl get -o custom-columns`
// through its facade need the members' OpenAPI v3 documents. Each member relays, through the
// ledger, the documents of the group-versions it collects: after each reconcile it reads the
// member's /openapi/v3 index and writes an OpenAPI record for every such group-version whose hash
// is not the one the ledger holds, and a tombstone for every record of a group-version no longer
// collected (or no longer in the index). Failing to do so never stops a collection: it is logged,
// and the next reconcile tries again.

// openAPIWriteTimeout bounds the wait for Kafka of one OpenAPI record, so a Kafka away holds the
// member's reconcile loop back no longer than that.
const openAPIWriteTimeout = 30 * time.Second

// openAPIPaths are the /openapi/v3 paths of the group-versions the member collects now.
func (m *member) openAPIPaths() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for _, r := range m.running {
		gvr := r.res.gvr
		out[registry.OpenAPIPath(gvr.Group, gvr.Version)] = true
		// The query API serves these Events in the other group too: kubectl explain and its
		// field selector checks read that group's document.
		if g, v, ok := registry.EventsSibling(gvr.Group, gvr.Version, gvr.Resource); ok {
			out[registry.OpenAPIPath(g, v)] = true
		}
	}
	return out
}

// syncOpenAPI relays the member's OpenAPI documents of what it collects through the ledger.
func (m *member) syncOpenAPI(ctx context.Context) error {
	cluster := m.cluster.Name
	want := m.openAPIPaths()
	have := m.c.ledger.openAPIHashes(cluster)
	var errs []error
	if len(want) > 0 {
		index, err := m.openapi.PathsWithContext(ctx)
		if err != nil {
			// What the ledger holds stays: it is the last document the member served.
			return fmt.Errorf("read the member's /openapi/v3: %w", err)
		}
		for _, path := range slices.Sorted(maps.Keys(want)) {
			gv, ok := index[path]
			if !ok {
				// Served without an OpenAPI document (an aggregated API without one, say): kubectl
				// explain cannot describe it on the member either.
				delete(want, path)
				continue
			}
			if err := m.relayOpenAPI(ctx, path, gv, have[path]); err != nil {
				errs = append(errs, fmt.Errorf("OpenAPI document %s: %w", path, err))
			}
		}
	}
	var gone []string
	for path := range have {
		if !want[path] {
			gone = append(gone, path)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		wctx, cancel := context.WithTimeout(ctx, openAPIWriteTimeout)
		defer cancel()
		if err := m.c.ledger.dropOpenAPI(wctx, cluster, gone); err != nil {
			errs = append(errs, fmt.Errorf("delete the OpenAPI records of %v: %w", gone, err))
		} else {
			m.log.Info("OpenAPI documents no longer relayed", "paths", gone)
		}
	}
	return errors.Join(errs...)
}

// relayOpenAPI writes the record of one path when the member's hash is not held's.
func (m *member) relayOpenAPI(ctx context.Context, path string, gv openapi.GroupVersionWithContext, held string) error {
	hash := hashOf(gv.ServerRelativeURL())
	if hash != "" && hash == held {
		return nil
	}
	doc, err := gv.SchemaWithContext(ctx, "application/json")
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	if hash == "" {
		// A server that does not hash its documents: hashed here as kube-apiserver does.
		hash = fmt.Sprintf("%X", sha512.Sum512(doc))
		if hash == held {
			return nil
		}
	}
	wctx, cancel := context.WithTimeout(ctx, openAPIWriteTimeout)
	defer cancel()
	if err := m.c.ledger.putOpenAPI(wctx, registry.OpenAPIRecord{Cluster: m.cluster.Name, Path: path, Hash: hash, Document: doc}); err != nil {
		return err
	}
	m.log.Info("OpenAPI document relayed", "path", path, "bytes", len(doc))
	return nil
}

// hashOf is the hash parameter of a serverRelativeURL, "" without one.
func hashOf(serverRelativeURL string) string {
	u, err := url.Parse(serverRelativeURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("hash")
}
