package search

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Run searches and prints. Errors name what was wrong; a Status the query API answered is a
// *ServerError, worded as kubectl words one.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t, err := loadTarget(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	if o.RequestTimeout > 0 {
		t.config.Timeout = o.RequestTimeout
	}
	warn := func(text string) { fmt.Fprintf(o.ErrOut, "Warning: %s\n", text) }
	c, err := newClient(t.config, warn)
	if err != nil {
		return err
	}
	k, err := newKinds(t.config, c.http, warn)
	if err != nil {
		return err
	}
	r := &run{opts: o, client: c, kinds: k, cluster: t.cluster}
	params, err := r.params(ctx)
	if err != nil {
		return err
	}
	if len(o.CountBy) > 0 {
		return r.counts(ctx, params)
	}
	items, total, err := r.objects(ctx, params)
	if err != nil {
		return err
	}
	if o.Limit > 0 && int64(len(items)) < total {
		fmt.Fprintf(o.ErrOut, "Showing %d of %d matches (--limit %d); --limit 0 prints every match.\n", len(items), total, o.Limit)
	}
	return r.print(ctx, items)
}

// run is one search being asked and printed.
type run struct {
	opts   Options
	client *client
	kinds  *kinds
	// cluster is the member of a one-cluster context, the default of --clusters.
	cluster string
	// resources are the resolved kinds, in the order typed; none means every kind.
	resources []schema.GroupResource
}

// params builds the REST search's parameters of the first page.
func (r *run) params(ctx context.Context) (url.Values, error) {
	o := r.opts
	p := url.Values{}
	var names []string
	for _, arg := range o.resourceArgs() {
		m, err := r.kinds.resolve(ctx, arg)
		if err != nil {
			return nil, err
		}
		gr := m.Resource.GroupResource()
		if !slices.Contains(r.resources, gr) {
			r.resources = append(r.resources, gr)
			names = append(names, searchName(gr))
		}
	}
	if len(names) > 0 {
		p.Set("resources", strings.Join(names, ","))
	}
	clusters := o.Clusters
	if len(clusters) == 0 && r.cluster != "" {
		clusters = []string{r.cluster}
	}
	if len(clusters) > 0 {
		p.Set("clusters", strings.Join(clusters, ","))
	}
	if len(o.Namespaces) > 0 {
		p.Set("namespaces", strings.Join(o.Namespaces, ","))
	}
	if o.LabelSelector != "" {
		p.Set("labelSelector", o.LabelSelector)
	}
	fieldSelector := o.FieldSelector
	if o.Image != "" {
		path, err := imagePath(r.resources)
		if err != nil {
			return nil, err
		}
		req := path + "=" + fields.EscapeValue(o.Image)
		if fieldSelector == "" {
			fieldSelector = req
		} else {
			fieldSelector += "," + req
		}
	}
	if fieldSelector != "" {
		p.Set("fieldSelector", fieldSelector)
	}
	if o.Text != "" {
		p.Set("q", o.Text)
	}
	if len(o.CountBy) > 0 {
		var facets []string
		for _, d := range o.CountBy {
			f, _ := facetOf(d)
			facets = append(facets, f)
		}
		p.Set("facets", strings.Join(facets, ","))
		// Every cluster, not the ten buckets of the default: a fleet has more members than that.
		p.Set("facetSize", strconv.Itoa(maxFacetSize))
		p.Set("limit", "1")
		p.Set("metadataOnly", "true")
		return p, nil
	}
	if o.Output == OutputName {
		p.Set("metadataOnly", "true") // a name needs no spec or status
	}
	p.Set("limit", strconv.Itoa(r.pageSize(0)))
	return p, nil
}

// pageSize is the next page's limit when have objects are read.
func (r *run) pageSize(have int) int {
	size := r.opts.ChunkSize
	if r.opts.Limit > 0 {
		size = min(size, r.opts.Limit-have)
	}
	return size
}

// objects reads pages until --limit objects or the last page. The continue token carries the first
// page's snapshot, so the pages never repeat or miss an object however the fleet changes meanwhile.
func (r *run) objects(ctx context.Context, p url.Values) ([]json.RawMessage, int64, error) {
	var items []json.RawMessage
	var total int64
	for first := true; ; first = false {
		res, err := r.client.search(ctx, p)
		if err != nil {
			return nil, 0, err
		}
		if first {
			total = res.Total
		}
		items = append(items, res.Items...)
		if res.Metadata.Continue == "" || (r.opts.Limit > 0 && len(items) >= r.opts.Limit) {
			return items, total, nil
		}
		p.Set("continue", res.Metadata.Continue)
		p.Set("limit", strconv.Itoa(r.pageSize(len(items))))
	}
}

// counts asks for the facets alone and prints them.
func (r *run) counts(ctx context.Context, p url.Values) error {
	res, err := r.client.search(ctx, p)
	if err != nil {
		return err
	}
	return printCounts(r.opts, r.opts.CountBy, res)
}
