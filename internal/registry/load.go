package registry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads the registries in path: a file, or a folder whose *.yaml, *.yml and *.json files are
// read in name order (not recursively; names starting with "." are skipped, which also skips the
// ..data links of a mounted ConfigMap). A file may hold several documents separated by "---", and a
// document may be a List or ResourceRegistryList. Decoding is strict: unknown and duplicate fields
// are errors. The registries are validated as a set (see Validate). Every problem of every file is
// reported at once; on error no registries are returned.
func Load(path string) ([]ResourceRegistry, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	var (
		registries []ResourceRegistry
		sources    []string
		errs       []error
	)
	for _, file := range files {
		regs, srcs, err := loadFile(file)
		if err != nil {
			errs = append(errs, err)
		}
		registries = append(registries, regs...)
		sources = append(sources, srcs...)
	}
	if err := validateSet(registries, sources); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return registries, nil
}

// configFiles lists the files Load reads for path.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load registries: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("load registries: %w", err)
	}
	var files []string
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !hasConfigExtension(name) {
			continue
		}
		file := filepath.Join(path, name)
		// Stat follows symlinks: ConfigMap volumes expose each key as a link.
		fi, err := os.Stat(file)
		if err != nil {
			return nil, fmt.Errorf("load registries: %w", err)
		}
		if fi.IsDir() {
			continue
		}
		files = append(files, file)
	}
	if len(files) == 0 {
		// Most likely a wrong mount or flag; collecting nothing silently would hide it.
		return nil, fmt.Errorf("load registries: no *.yaml, *.yml or *.json files in folder %s", path)
	}
	return files, nil
}

func hasConfigExtension(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// loadFile decodes every document of one file. It returns what decoded, with the source of each,
// and the errors of what did not, so that validation can still report the rest.
func loadFile(file string) ([]ResourceRegistry, []string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("load registries: %w", err)
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	var (
		registries []ResourceRegistry
		sources    []string
		errs       []error
	)
	for i, doc := range docs {
		source := file
		if len(docs) > 1 {
			source = fmt.Sprintf("%s: document %d", file, i+1)
		}
		regs, srcs, err := decodeDocument(doc, source)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		registries = append(registries, regs...)
		sources = append(sources, srcs...)
	}
	return registries, sources, errors.Join(errs...)
}

// splitDocuments returns the non-empty YAML documents of data, converted to JSON. Documents holding
// only comments or whitespace are dropped.
func splitDocuments(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		// YAMLToJSONStrict rejects duplicate keys, which plain YAML decoding silently merges.
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		docs = append(docs, j)
	}
}

// decodeDocument decodes one JSON document: a ResourceRegistry, or a list of them.
func decodeDocument(doc []byte, source string) ([]ResourceRegistry, []string, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(doc, &tm); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", source, err)
	}
	switch {
	case tm.APIVersion == APIVersion && tm.Kind == Kind:
		var r ResourceRegistry
		if err := decodeStrict(doc, &r, source); err != nil {
			return nil, nil, err
		}
		return []ResourceRegistry{r}, []string{source}, nil
	case tm.APIVersion == APIVersion && tm.Kind == ListKind, tm.APIVersion == "v1" && tm.Kind == "List":
		var list resourceRegistryList
		if err := decodeStrict(doc, &list, source); err != nil {
			return nil, nil, err
		}
		var (
			sources []string
			errs    []error
		)
		for i, item := range list.Items {
			src := fmt.Sprintf("%s: items[%d]", source, i)
			sources = append(sources, src)
			// Karmada's typed list may leave the items' type implied; a generic List may not.
			implied := tm.Kind == ListKind && item.APIVersion == "" && item.Kind == ""
			if !implied && (item.APIVersion != APIVersion || item.Kind != Kind) {
				errs = append(errs, fmt.Errorf("%s: %w", src, wrongType(item.TypeMeta)))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, nil, err
		}
		return list.Items, sources, nil
	default:
		return nil, nil, fmt.Errorf("%s: %w", source, wrongType(tm))
	}
}

func wrongType(tm metav1.TypeMeta) error {
	if tm.Kind == "ClusterCache" {
		return fmt.Errorf("apiVersion %q kind %q is the caching proposal's early draft, never served by Karmada; write it as apiVersion %s kind %s (spec.targetCluster, and an apiVersion on every resource selector)",
			tm.APIVersion, tm.Kind, APIVersion, Kind)
	}
	return fmt.Errorf("apiVersion %q kind %q is not a ResourceRegistry: want apiVersion %s kind %s (or a List of them)",
		tm.APIVersion, tm.Kind, APIVersion, Kind)
}

// decodeStrict decodes doc into v, reporting every unknown or duplicate field with its full path.
func decodeStrict(doc []byte, v any, source string) error {
	strictErrs, err := kjson.UnmarshalStrict(doc, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	errs := make([]error, 0, len(strictErrs))
	for _, e := range strictErrs {
		errs = append(errs, fmt.Errorf("%s: %w", source, e))
	}
	return errors.Join(errs...)
}
