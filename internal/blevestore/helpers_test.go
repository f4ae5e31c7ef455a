package blevestore

import "net/url"

func urlValues(s string) (url.Values, error) {
	v := url.Values{}
	if s == "" {
		return v, nil
	}
	for _, kv := range splitAmp(s) {
		k, val, _ := cut(kv, '=')
		v.Add(k, val)
	}
	return v, nil
}

// splitAmp splits raw parameters at &, without unescaping (selectors hold = and !).
func splitAmp(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '&' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
