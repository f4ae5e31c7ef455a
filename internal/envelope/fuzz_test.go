package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUnmarshal: any record of the stream either decodes into an event that Marshal writes
// back and Unmarshal reads again to the same bytes, key and meaning, or is ErrMalformed saying
// what is wrong — the JSON error, or one line per bad field naming the field.
// Run longer with: go test -fuzz FuzzUnmarshal ./internal/envelope/
func FuzzUnmarshal(f *testing.F) {
	golden, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	if err != nil || len(golden) == 0 {
		f.Fatalf("no golden envelopes for seeds: %v", err)
	}
	for _, name := range golden {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		`{"v":1,"type":"MODIFIED","cluster":"member2","group":"apps","version":"v1","resource":"deployments","kind":"Deployment","namespace":"shop","name":"web","uid":"u1","resourceVersion":"9","epoch":2,"observedAt":"2026-11-29T12:00:00+01:00","changedAt":"2026-11-29T10:59:59.5Z","object":{"kind":"Deployment"}}`,
		`{"v":1,"type":"SYNC","cluster":"c","kind":"Pod","version":"v1","resource":"pods","count":3,"listResourceVersion":"77","epoch":-1,"observedAt":"0001-01-01T00:00:00Z"}`,
		`{"v":1,"type":"PURGE","cluster":"c","kind":"Pod"}`,
		`{"v":2,"type":"UPSERT"}`,
		`{"v":1,"type":"ADDED","cluster":"c","kind":"Pod","version":"v1","resource":"pods","name":"n","uid":"u","object":null}`,
		`{"v":1,"type":"DELETED","cluster":"c","kind":"Pod","version":"v1","resource":"pods","name":"n","uid":"u","count":null,"Cluster":"d"}`,
		`{"v":"1"}`, `[]`, `null`, `{"v":1,`, "{\"v\":1,\"cluster\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	fields := []string{"v: ", "cluster: ", "kind: ", "version, resource: ", "uid, name: ", "object: ", "count: ", "type: "}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := Unmarshal(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || ev != nil {
				t.Fatalf("Unmarshal(%q) = %v, %v; want only an ErrMalformed", data, ev, err)
			}
			if json.Unmarshal(data, new(Event)) != nil {
				return // the JSON decoder's own error, which names the offset or field
			}
			msg := strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": ")
			for line := range strings.SplitSeq(msg, "\n") {
				if !hasAnyPrefix(line, fields) {
					t.Fatalf("Unmarshal(%q): error line %q names no field", data, line)
				}
			}
			return
		}
		out, err := ev.Marshal()
		if err != nil {
			t.Fatalf("Unmarshal(%q) accepted an event Marshal cannot write: %v", data, err)
		}
		back, err := Unmarshal(out)
		if err != nil {
			t.Fatalf("Unmarshal(%q) accepted an event whose Marshal %s it refuses: %v", data, out, err)
		}
		again, err := back.Marshal()
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip changed the event:\n%s\n%s (%v)", out, again, err)
		}
		if !bytes.Equal(back.Key(), ev.Key()) || back.Type != ev.Type || back.Epoch != ev.Epoch ||
			!back.ObservedAt.Equal(ev.ObservedAt) || !back.LastChanged().Equal(ev.LastChanged()) ||
			back.NamespacedName() != ev.NamespacedName() || !bytes.Equal(compactJSON(t, back.Object), compactJSON(t, ev.Object)) {
			t.Fatalf("round trip changed the event's meaning:\n%+v\n%+v", ev, back)
		}
	})
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("object %q is not JSON: %v", raw, err)
	}
	return b.Bytes()
}
