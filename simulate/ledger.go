package simulate

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// The simulator keeps the collectors' ledger (registry.LedgerTopic) as collectors do, under its own
// name (Options.Name): a selection record per (cluster, kind) before the kind's list, an epochs
// record per cluster before any epoch is handed out, an OpenAPI record per group-version collected;
// and at start, a PURGE (then a tombstone) for every selection it recorded earlier and no longer
// simulates — a kind left out of --kinds, a cluster beyond --clusters — as a collector purges what
// left its registries while it was down.

// ledgerState is what the ledger holds, as read at start.
type ledgerState struct {
	// selections: by cluster and key, the live selection records.
	selections map[string]map[string]registry.SelectionRecord
	// openapi: by cluster and path, the hash of the live OpenAPI records, and their owners.
	openapi map[string]map[string]openAPIHeld
	// floor is the highest epoch any epochs record reserved.
	floor int64
}

type openAPIHeld struct{ hash, owner string }

// readLedger creates the ledger's topic when missing and reads it whole.
func (s *Simulator) readLedger(ctx context.Context) (ledgerState, error) {
	st := ledgerState{selections: map[string]map[string]registry.SelectionRecord{}, openapi: map[string]map[string]openAPIHeld{}}
	topic := registry.LedgerTopic(s.opts.Topic)
	if err := s.broker.EnsureTopic(ctx, stream.Topic{Name: topic, Partitions: 1, Config: registry.LedgerTopicConfig()}); err != nil {
		return st, err
	}
	msgs, err := s.broker.ReadPartition(ctx, topic, 0)
	if err != nil {
		return st, fmt.Errorf("read the collector ledger %s: %w", topic, err)
	}
	for _, m := range msgs {
		key := string(m.Key)
		switch {
		case strings.HasPrefix(key, registry.SelectionRecordPrefix):
			cluster, _, _ := strings.Cut(strings.TrimPrefix(key, registry.SelectionRecordPrefix), "/")
			if m.Value == nil {
				delete(st.selections[cluster], key)
				continue
			}
			var r registry.SelectionRecord
			if json.Unmarshal(m.Value, &r) != nil || r.V != registry.LedgerVersion {
				continue // another build's: left to it
			}
			if st.selections[cluster] == nil {
				st.selections[cluster] = map[string]registry.SelectionRecord{}
			}
			st.selections[cluster][key] = r
		case strings.HasPrefix(key, registry.OpenAPIRecordPrefix):
			cluster, path, ok := registry.ParseOpenAPIRecordKey(key)
			if !ok {
				continue
			}
			if m.Value == nil {
				delete(st.openapi[cluster], path)
				continue
			}
			var r struct {
				V     int    `json:"v"`
				Owner string `json:"owner"`
				Hash  string `json:"hash"`
			}
			if json.Unmarshal(m.Value, &r) != nil || r.V != registry.LedgerVersion {
				continue
			}
			if st.openapi[cluster] == nil {
				st.openapi[cluster] = map[string]openAPIHeld{}
			}
			st.openapi[cluster][path] = openAPIHeld{hash: r.Hash, owner: r.Owner}
		case strings.HasPrefix(key, registry.EpochsRecordPrefix):
			var r registry.EpochsRecord
			if json.Unmarshal(m.Value, &r) == nil {
				st.floor = max(st.floor, r.EpochsReserved)
			}
		}
	}
	return st, nil
}

// forgotten are the selection records of the ledger the simulation no longer makes: of its clusters,
// those of kinds it does not select or the cluster does not serve; of other clusters, those it
// wrote. A kind served at another version than recorded is not forgotten: its record is written
// again, and the list of the new version, in a new epoch, replaces its documents.
func (s *Simulator) forgotten(held ledgerState) []registry.SelectionRecord {
	var out []registry.SelectionRecord
	for _, cluster := range slices.Sorted(maps.Keys(held.selections)) {
		c := s.byName[cluster]
		for _, key := range slices.Sorted(maps.Keys(held.selections[cluster])) {
			r := held.selections[cluster][key]
			if c == nil {
				if r.Owner == s.opts.Name {
					out = append(out, r)
				}
				continue
			}
			if !c.collects(r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// collects says whether the cluster's simulation makes the selection r records.
func (c *cluster) collects(r registry.SelectionRecord) bool {
	for k, p := range c.pairs {
		if p != nil && kinds[k].group == r.Group && kinds[k].kind == r.Kind && r.Namespace == "" {
			return true
		}
	}
	return false
}

// purge publishes a PURGE for each record, waits until Kafka has them, then makes the records
// tombstones, as a collector does.
func (s *Simulator) purge(ctx context.Context, w *writer, records []registry.SelectionRecord) error {
	if len(records) == 0 {
		return nil
	}
	tombstones := make([]stream.Message, 0, len(records))
	for _, r := range records {
		epoch, err := s.epochs.Next(ctx)
		if err != nil {
			return err
		}
		ev := &envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: r.Cluster, Group: r.Group, Version: r.Version,
			Resource: r.Resource, Kind: r.Kind, Namespace: r.Namespace, Epoch: epoch, ObservedAt: time.Now().UTC()}
		if err := w.add(ctx, ev); err != nil {
			return err
		}
		tombstones = append(tombstones, stream.Message{Key: []byte(registry.SelectionRecordKey(r.Cluster, r.Key()))})
	}
	if err := w.flush(ctx); err != nil {
		return err
	}
	s.log.Info("purged what the simulation no longer makes", "selections", len(records))
	return s.writeLedger(ctx, tombstones)
}

// writeLedger writes ledger records, waiting until Kafka has them.
func (s *Simulator) writeLedger(ctx context.Context, msgs []stream.Message) error {
	const batch = 500
	for len(msgs) > 0 {
		n := min(batch, len(msgs))
		if err := writeRetrying(ctx, s.ledger, msgs[:n], s.log); err != nil {
			return fmt.Errorf("write the collector ledger: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// recordSelections writes the selection record of every pair the ledger does not hold as it is,
// and the OpenAPI records of the group-versions collected whose document the ledger does not hold.
// OpenAPI records of the simulation's clusters it no longer needs become tombstones.
func (s *Simulator) recordSelections(ctx context.Context, held ledgerState) error {
	var msgs []stream.Message
	now := time.Now().UTC()
	for _, c := range s.clusters {
		paths := map[string]bool{}
		for k, p := range c.pairs {
			if p == nil {
				continue
			}
			r := kinds[k].record(c.name, p.version)
			r.Owner = s.opts.Name
			key := registry.SelectionRecordKey(c.name, r.Key())
			if old, ok := held.selections[c.name][key]; ok {
				old.UpdatedAt = time.Time{}
				if sameRecord(old, r) {
					continue
				}
			}
			r.UpdatedAt = now
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			msgs = append(msgs, stream.Message{Key: []byte(key), Value: v})
		}
		for k, p := range c.pairs {
			if p != nil {
				paths[registry.OpenAPIPath(kinds[k].group, p.version)] = true
			}
		}
		for _, path := range slices.Sorted(maps.Keys(paths)) {
			doc := s.openAPI(path)
			if held.openapi[c.name][path].hash == doc.hash {
				continue
			}
			v, err := json.Marshal(registry.OpenAPIRecord{V: registry.LedgerVersion, Cluster: c.name, Owner: s.opts.Name, Path: path,
				Hash: doc.hash, Document: doc.body, UpdatedAt: now})
			if err != nil {
				return err
			}
			msgs = append(msgs, stream.Message{Key: []byte(registry.OpenAPIRecordKey(c.name, path)), Value: v})
		}
		for path := range held.openapi[c.name] {
			if !paths[path] {
				msgs = append(msgs, stream.Message{Key: []byte(registry.OpenAPIRecordKey(c.name, path))})
			}
		}
	}
	// OpenAPI records of clusters no longer simulated that this simulator wrote.
	for cluster, docs := range held.openapi {
		if s.byName[cluster] != nil {
			continue
		}
		for path, d := range docs {
			if d.owner == s.opts.Name {
				msgs = append(msgs, stream.Message{Key: []byte(registry.OpenAPIRecordKey(cluster, path))})
			}
		}
	}
	return s.writeLedger(ctx, msgs)
}

func sameRecord(a, b registry.SelectionRecord) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// openAPIDoc is a group-version's OpenAPI v3 document and its hash, as a member serves them.
type openAPIDoc struct {
	body []byte
	hash string
}

// openAPI is the document of a group-version path: the same in every cluster serving it (members
// of one Kubernetes version serve the same documents), so the query API keeps it once. It describes
// the simulated kinds of the group-version, smaller than a real member's (api/v1's is 1.5 MiB).
func (s *Simulator) openAPI(path string) openAPIDoc {
	if d, ok := s.docs.Load(path); ok {
		return d.(openAPIDoc)
	}
	schemas := map[string]any{
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": map[string]any{"type": "object",
			"description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
			"properties": map[string]any{
				"name":            map[string]any{"type": "string", "description": "Name must be unique within a namespace."},
				"namespace":       map[string]any{"type": "string", "description": "Namespace defines the space within which each name must be unique."},
				"uid":             map[string]any{"type": "string", "description": "UID is the unique in time and space value for this object."},
				"resourceVersion": map[string]any{"type": "string", "description": "An opaque value that represents the internal version of this object."},
				"labels":          map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "default": ""}},
				"annotations":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "default": ""}},
			}},
	}
	apiPaths := map[string]any{}
	for k := range kinds {
		kk := &kinds[k]
		for i := 1; i <= 12; i++ { // every version a simulated cluster serves
			v := kk.version(i)
			if v == "" || registry.OpenAPIPath(kk.group, v) != path {
				continue
			}
			name := "io.k8s.simulated." + strings.ReplaceAll(kk.group, ".", "_") + "." + v + "." + kk.kind
			schemas[name] = map[string]any{"type": "object", "description": kk.kind + " as the simulated members serve it.",
				"properties": map[string]any{
					"apiVersion": map[string]any{"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
					"kind":       map[string]any{"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
					"metadata":   map[string]any{"allOf": []any{map[string]any{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}, "default": map[string]any{}},
					"spec":       map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					"status":     map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
				},
				"x-kubernetes-group-version-kind": []any{map[string]any{"group": kk.group, "kind": kk.kind, "version": v}}}
			collection := "/" + path + "/" + kk.resource
			if kk.namespaced {
				collection = "/" + path + "/namespaces/{namespace}/" + kk.resource
			}
			apiPaths[collection] = map[string]any{"get": map[string]any{"operationId": "list" + kk.kind, "responses": map[string]any{
				"200": map[string]any{"description": "OK"}}}}
			break
		}
	}
	body, _ := json.Marshal(map[string]any{"openapi": "3.0.0", "info": map[string]any{"title": "Kubernetes", "version": "v1.34.3"},
		"paths": apiPaths, "components": map[string]any{"schemas": schemas}})
	d := openAPIDoc{body: body, hash: fmt.Sprintf("%X", sha512.Sum512(body))}
	actual, _ := s.docs.LoadOrStore(path, d)
	return actual.(openAPIDoc)
}

// reserveEpochs writes the epochs record of every simulated cluster.
func (s *Simulator) reserveEpochs(ctx context.Context, upTo int64) error {
	now := time.Now().UTC()
	msgs := make([]stream.Message, 0, len(s.clusters))
	for _, c := range s.clusters {
		v, err := json.Marshal(registry.EpochsRecord{V: registry.LedgerVersion, Cluster: c.name, Owner: s.opts.Name, EpochsReserved: upTo, UpdatedAt: now})
		if err != nil {
			return err
		}
		msgs = append(msgs, stream.Message{Key: []byte(registry.EpochsRecordKey(c.name)), Value: v})
	}
	return s.writeLedger(ctx, msgs)
}
