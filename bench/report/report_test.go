package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var fixtureMachine = Machine{CPUs: 2, CPU: "Test CPU", Memory: "24 GiB", OS: "linux/amd64", Go: "go1.27.3"}

// fixtureOptions reports the fixture into a fresh results folder beside a copy of the README fixture.
func fixtureOptions(t *testing.T) options {
	t.Helper()
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	data, err := os.ReadFile("testdata/readme.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return options{Results: "testdata/results.jsonl", Steps: "testdata/steps.tsv", Scale: "small", Date: "2026-12-01-1730",
		Commit: "abc1234", Machine: fixtureMachine, Out: filepath.Join(dir, "bench", "results"), Readme: readme}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, path, got)
	}
}

func TestReport(t *testing.T) {
	opts := fixtureOptions(t)
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(opts); err != nil {
		t.Fatal(err)
	}

	t.Run("markdown", func(t *testing.T) {
		md, err := os.ReadFile(filepath.Join(opts.Out, "2026-12-01-1730.md"))
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "report.md", md)
	})

	t.Run("json", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(opts.Out, "2026-12-01-1730.json"))
		if err != nil {
			t.Fatal(err)
		}
		var got Run
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Date != opts.Date || got.Commit != "abc1234" || got.Scale != "small" || got.Machine != fixtureMachine {
			t.Errorf("run facts: %+v", got)
		}
		if len(got.Results) != 19 || len(got.Steps) != 7 {
			t.Fatalf("%d results, %d steps; want 19, 7", len(got.Results), len(got.Steps))
		}
		if r := got.Results[2]; r.Bench != "indexer" || r.Value != 0.9482 || r.Met == nil || !*r.Met || r.Goal != "≥ 0.8×" {
			t.Errorf("result 2: %+v", r)
		}
		if r := got.Results[3]; r.Met != nil {
			t.Errorf("a goal without a verdict came back with one: %+v", r)
		}
		if r := got.Results[5]; len(r.Series) != 7 || r.Series[6] != (Sample{At: 1.13, Value: 60.1}) {
			t.Errorf("result 5's series: %+v", r)
		}
		if r := got.Results[4]; r.Series != nil {
			t.Errorf("a figure without a series came back with one: %+v", r)
		}
		if s := got.Steps[2]; s != (Step{Bench: "freshness", Status: "skipped", Seconds: 4}) {
			t.Errorf("step 2: %+v", s)
		}
	})

	t.Run("svg", func(t *testing.T) {
		for _, name := range []string{"rates.svg", "latency.svg", "memory.svg", "memory-over-time.svg"} {
			data, err := os.ReadFile(filepath.Join(opts.Out, "2026-12-01-1730", name))
			if err != nil {
				t.Fatal(err)
			}
			texts := wellFormed(t, name, data)
			switch name {
			case "rates.svg":
				want(t, name, texts, "raw _bulk replay before the indexer", "1421 docs/s", "310 objects/s")
			case "latency.svg":
				want(t, name, texts, "selector p99", "62.3 ms", "watch delivery p99", "542 ms")
			case "memory.svg":
				want(t, name, texts, "query API RSS growth", "257 MiB")
				if slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, "over time") }) {
					t.Errorf("%s draws a series' peak as a bar: %q", name, texts)
				}
			case "memory-over-time.svg":
				want(t, name, texts, "collector: resident memory over time (VmRSS every 200 ms), peak", "· 61.5 MiB",
					"facade-memory: query API resident memory over time (VmRSS every 500 ms), peak", "· 571 MiB",
					"MiB", "0", "600", "2.5", "seconds since sampling started")
			}
		}
	})

	t.Run("readme", func(t *testing.T) {
		first, err := os.ReadFile(opts.Readme)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "readme.md", first)
		// Again, README only: the same file.
		opts := opts
		opts.Results = ""
		if err := run(opts); err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(opts.Readme)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("a second run changed the README:\n%s", second)
		}
	})
}

// wellFormed parses an SVG document and returns its text content, one entry per element.
func wellFormed(t *testing.T, name string, data []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var texts []string
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Space + " " + tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Errorf("%s: root element %q, want svg in the SVG namespace", name, root)
	}
	return texts
}

func want(t *testing.T, name string, texts []string, wanted ...string) {
	t.Helper()
	for _, w := range wanted {
		found := false
		for _, s := range texts {
			found = found || s == w
		}
		if !found {
			t.Errorf("%s has no text %q: %q", name, w, texts)
		}
	}
}

func TestSplice(t *testing.T) {
	for _, tc := range []struct {
		name, readme, want string
		err                bool
	}{
		{name: "replaces", readme: "a\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nb\n",
			want: "a\n<!-- bench:begin -->\nnew\n<!-- bench:end -->\nb\n"},
		{name: "empty section", readme: "<!-- bench:begin --><!-- bench:end -->",
			want: "<!-- bench:begin -->\nnew\n<!-- bench:end -->"},
		{name: "no markers", readme: "a\n", err: true},
		{name: "end before begin", readme: "<!-- bench:end -->\n<!-- bench:begin -->\n", err: true},
		{name: "two sections", readme: strings.Repeat("<!-- bench:begin -->\n<!-- bench:end -->\n", 2), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splice([]byte(tc.readme), "\nnew\n\n")
			if tc.err {
				if !errors.Is(err, errMarkers) {
					t.Fatalf("err %v, want errMarkers", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			again, _ := splice(got, "new")
			if !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %q", again)
			}
		})
	}
}

func TestReadResults(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Result
		err      string
	}{
		{name: "lines", in: "{\"bench\":\"a\",\"what\":\"x\",\"value\":1,\"unit\":\"s\"}\n\n{\"bench\":\"b\",\"what\":\"y\",\"value\":2.5,\"unit\":\"ms\"}\n",
			want: []Result{{Bench: "a", What: "x", Value: 1, Unit: "s"}, {Bench: "b", What: "y", Value: 2.5, Unit: "ms"}}},
		{name: "series", in: `{"bench":"a","what":"x over time","value":3,"unit":"MiB","series":[{"at":0,"value":1},{"at":0.5,"value":3}]}`,
			want: []Result{{Bench: "a", What: "x over time", Value: 3, Unit: "MiB", Series: []Sample{{At: 0, Value: 1}, {At: 0.5, Value: 3}}}}},
		{name: "empty", in: "", want: []Result{}},
		{name: "not JSON", in: "{\"bench\":\"a\",\"what\":\"x\"}\nBENCH x\n", err: "line 2"},
		{name: "unknown field", in: `{"bench":"a","what":"x","valu":1}`, err: "line 1"},
		{name: "no bench", in: `{"what":"x","value":1}`, err: "needs bench"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readResults(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 3: "3", 0.9482: "0.95", 62.34: "62.3", 1420.7: "1421", -12.5: "-12.5", 0.0004: "0.0004", 2.1: "2.10"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
