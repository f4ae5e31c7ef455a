package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// envPrefix starts the environment variable of every flag: --log-level is KUBESEARCH_LOG_LEVEL.
const envPrefix = "KUBESEARCH_"

// lookupEnv is os.LookupEnv; tests pass their own environment.
type lookupEnv func(key string) (string, bool)

// envName is the environment variable that sets a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// resolveFlags sets the flags the command line left alone, from the environment first, then from
// the --config file (itself a flag, so KUBESEARCH_CONFIG names it too). Every bad value and every
// unknown key of the file is reported at once. Set marks a flag changed, so a value from either
// source counts as given, as on the command line.
func resolveFlags(cmd *cobra.Command, env lookupEnv) error {
	fs := cmd.Flags()
	var errs []error
	setFromEnv := func(f *pflag.Flag) bool {
		v, ok := env(envName(f.Name))
		if !ok || v == "" { // an empty variable is unset: compose files and env files leave blanks
			return false
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
		}
		return true
	}
	if f := fs.Lookup("config"); f != nil && !f.Changed {
		setFromEnv(f)
	}
	path, _ := fs.GetString("config")
	values, err := readConfig(path, cmd)
	if err != nil {
		errs = append(errs, err)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == "config" || setFromEnv(f) {
			return
		}
		if v, ok := values[f.Name]; ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("config %s: %s: %w", path, f.Name, err))
			}
		}
	})
	return errors.Join(errs...)
}

// readConfig reads a config file: a YAML mapping of flag names (without dashes) to values; a list
// is accepted for a comma-separated list flag. It returns each value as the command line would
// spell it, also when it returns an error for other keys. An empty path is no file.
func readConfig(path string, cmd *cobra.Command) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // 100000 stays 100000, not 1e+05
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("config %s: want a mapping of flag names to values", path)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	values := make(map[string]string, len(doc))
	var errs []error
	for _, k := range keys {
		f := cmd.Flags().Lookup(k)
		if f == nil || k == "help" || k == "config" {
			errs = append(errs, fmt.Errorf("config %s: unknown key %q: not a flag of %s", path, k, cmd.CommandPath()))
			continue
		}
		// Lists for the flags that split a comma-separated value: ours, and pflag's string slices
		// (--requestheader-allowed-names and the other --requestheader-* flags).
		v, err := configValue(doc[k], f.Value.Type() == "strings" || f.Value.Type() == "stringSlice")
		if err != nil {
			errs = append(errs, fmt.Errorf("config %s: %s: %w", path, k, err))
			continue
		}
		values[k] = v
	}
	return values, errors.Join(errs...)
}

// configValue spells a YAML value as the command line would.
func configValue(v any, list bool) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case []any:
		if !list {
			return "", errors.New("a list, but the flag takes one value")
		}
		items := make([]string, 0, len(v))
		for _, item := range v {
			s, err := configValue(item, false)
			if err != nil {
				return "", fmt.Errorf("list item: %w", err)
			}
			items = append(items, s)
		}
		return strings.Join(items, ","), nil
	case nil:
		return "", errors.New(`no value (write "" for an empty one)`)
	default:
		return "", errors.New("a mapping, but the flag takes a value")
	}
}
