package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/table"
)

// SearchRow is one item of a search as a row of its resource's Table: what `kubectl get` and the
// facade print for the object, so a client of the REST search (the search page) shows a kind's own
// columns without a printer of its own.
type SearchRow struct {
	// Resource keys the item's column definitions in SearchResult.Columns: "pods",
	// "deployments.apps".
	Resource string `json:"resource"`
	// Cells are the row's cells, in the order of the resource's column definitions.
	Cells []any `json:"cells"`
}

// wantsTable says whether a search's Accept header asks for Table rows beside the items, in the
// media type kube-apiserver uses for Tables: the REST search's answer stays a SearchResult (its
// facets, totals and freshness are not a Table's), with rows added.
func wantsTable(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt := mediaParams(part)
		if mt.typ == "application/json" && mt.params["as"] == "Table" && mt.params["g"] == "meta.k8s.io" &&
			(mt.params["v"] == "v1" || mt.params["v"] == "v1beta1") {
			return true
		}
	}
	return false
}

// tableRows renders each item as its resource's Table row, with the printers the facade uses
// (printerFor): a custom resource's columns come from its CRD in the lowest-named cluster of the
// page that holds the resource, a cluster the items show the subject may see.
func (s *Server) tableRows(ctx context.Context, items []json.RawMessage, now time.Time) (map[string][]metav1.TableColumnDefinition, []SearchRow, error) {
	type item struct {
		res     apiResource
		key     string
		cluster string
	}
	found := make([]item, len(items))
	clustersOf := map[string][]string{}
	for i, obj := range items {
		tk := gjson.GetManyBytes(obj, "apiVersion", "kind")
		gv, err := schema.ParseGroupVersion(tk[0].Str)
		if err != nil {
			return nil, nil, fmt.Errorf("table row: apiVersion %q: %w", tk[0].Str, err)
		}
		cluster := clusterOf(obj)
		res := apiResource{Group: gv.Group, Version: gv.Version, Kind: tk[1].Str,
			Resource: s.catalog.resourceOf(cluster, gv.Group, tk[1].Str)}
		if res.Resource == "" {
			// A member the catalog does not list (a cluster removed, its documents not purged
			// yet): the kind's regular plural, as kubectl guesses it.
			plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(res.Kind))
			res.Resource = plural.Resource
		}
		key := groupResource(res)
		found[i] = item{res: res, key: key, cluster: cluster}
		if !slices.Contains(clustersOf[key], cluster) {
			clustersOf[key] = append(clustersOf[key], cluster)
		}
	}
	columns := map[string][]metav1.TableColumnDefinition{}
	printers := map[string]printer{}
	rows := make([]SearchRow, len(items))
	for i, it := range found {
		p, ok := printers[it.key]
		if !ok {
			clusters := slices.Sorted(slices.Values(clustersOf[it.key]))
			var err error
			if p, err = s.printerFor(ctx, it.res, clusters); err != nil {
				return nil, nil, fmt.Errorf("table columns of %s: %w", it.key, err)
			}
			printers[it.key], columns[it.key] = p, p.Columns()
		}
		row, err := p.Row(items[i], now)
		if err != nil {
			return nil, nil, fmt.Errorf("table row of %s %s: %w", it.key, gjson.GetBytes(items[i], "metadata.name").Str, err)
		}
		rows[i] = SearchRow{Resource: it.key, Cells: row.Cells}
	}
	return columns, rows, nil
}

// columnSorts names, per resource of columns and per column, the REST search's sort field that
// orders it: a built-in kind's own columns sort by the keys the indexer stored
// (query.SortColumnPrefix + table.ColumnID), NAME, STATUS and AGE by the fixed fields. A custom
// resource's columns (its CRD's: their definitions are not known when its objects are indexed)
// and kube-apiserver's default Created At have no sort here. The search page makes a header
// clickable by it.
func columnSorts(columns map[string][]metav1.TableColumnDefinition) map[string][]string {
	out := map[string][]string{}
	for key, defs := range columns {
		resource, group, _ := strings.Cut(key, ".")
		var keyed []string
		if p, ok := table.Lookup(group, resource); ok {
			keyed = p.SortColumns()
		}
		sorts := make([]string, len(defs))
		for i, d := range defs {
			switch id := table.ColumnID(d.Name); {
			case keyed == nil:
			case d.Name == "Name":
				sorts[i] = query.SortName
			case d.Name == table.StatusColumn:
				sorts[i] = query.SortStatus
			case d.Name == "Age":
				sorts[i] = query.SortCreationTimestamp
			case slices.Contains(keyed, id):
				sorts[i] = query.SortColumnPrefix + id
			}
		}
		out[key] = sorts
	}
	return out
}
