package blevestore

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/kubesearch/kubesearch/internal/store"
)

// Watermarks live in the state database (bbolt, under Dir), one JSON store.Watermark per pair
// keyed by Pair.ID(): bbolt keeps keys in byte order, the order Watermarks returns them in, as
// osstore sorts by that key. Every update is one fsynced transaction.

var watermarkBucket = []byte("watermarks")

// LoadWatermarks reads the stored watermarks of pairs; those never stored are absent from the map.
func (s *Store) LoadWatermarks(ctx context.Context, pairs []store.Pair) (map[store.Pair]*store.Watermark, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[store.Pair]*store.Watermark{}
	err := s.state.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(watermarkBucket)
		for _, p := range pairs {
			v := b.Get([]byte(p.ID()))
			if v == nil {
				continue
			}
			w, err := parseWatermark(v)
			if err != nil {
				return err
			}
			out[p] = &w
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load watermarks: %w", err)
	}
	return out, nil
}

// SaveWatermarks writes watermarks, replacing the stored ones of their pairs, in one transaction.
func (s *Store) SaveWatermarks(ctx context.Context, ws []store.Watermark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ws) == 0 {
		return nil
	}
	err := s.state.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(watermarkBucket)
		for _, w := range ws {
			if old := b.Get([]byte(w.Pair().ID())); old != nil && w.Position > 0 {
				var stored store.Watermark
				if json.Unmarshal(old, &stored) == nil && stored.Position > w.Position {
					continue // a watermark of a later position is stored (store.Watermark.Position)
				}
			}
			v, err := json.Marshal(w)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(w.Pair().ID()), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store %d watermarks: %w", len(ws), err)
	}
	return nil
}

// DeleteWatermarks deletes the stored watermarks of pairs that are gone.
func (s *Store) DeleteWatermarks(ctx context.Context, pairs []store.Pair) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(pairs) == 0 {
		return nil
	}
	err := s.state.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(watermarkBucket)
		for _, p := range pairs {
			if err := b.Delete([]byte(p.ID())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %d watermarks: %w", len(pairs), err)
	}
	return nil
}

// SelectionWatermarks reads the stored watermarks of the pairs of sel's (cluster, group, kind),
// whatever its namespace: those a PURGE of sel changes.
func (s *Store) SelectionWatermarks(ctx context.Context, sel store.Selection) ([]store.Watermark, error) {
	ws, err := s.watermarks(ctx, func(w store.Watermark) bool {
		return w.Cluster == sel.Cluster && w.Group == sel.Group && w.Kind == sel.Kind
	})
	if err != nil {
		return nil, fmt.Errorf("read the watermarks of a selection: %w", err)
	}
	return ws, nil
}

// Watermarks reads every stored watermark, ordered by their pair's ID ("cluster/group/resource" as
// one string, as osstore orders them).
func (s *Store) Watermarks(ctx context.Context) ([]store.Watermark, error) {
	ws, err := s.watermarks(ctx, func(store.Watermark) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("read watermarks: %w", err)
	}
	return ws, nil
}

func (s *Store) watermarks(ctx context.Context, keep func(store.Watermark) bool) ([]store.Watermark, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []store.Watermark
	err := s.state.View(func(tx *bolt.Tx) error {
		return tx.Bucket(watermarkBucket).ForEach(func(_, v []byte) error {
			w, err := parseWatermark(v)
			if err == nil && keep(w) {
				out = append(out, w)
			}
			return err
		})
	})
	return out, err
}

func parseWatermark(v []byte) (store.Watermark, error) {
	var w store.Watermark
	if err := json.Unmarshal(v, &w); err != nil {
		return w, fmt.Errorf("watermark document: %w", err)
	}
	return w, nil
}
