package auth

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
)

// FuzzTokenFile: any file either parses into entries that name a user, each found by its token,
// or fails with an error naming the file and showing no token of it.
func FuzzTokenFile(f *testing.F) {
	for _, seed := range []string{
		"token1,alice,uid1\n",
		"token1,alice,uid1,\"sre,dev\"\ntoken2,bob,uid2,ops\n",
		"\n\ntoken1,alice,uid1,\"\"\n",
		",nobody,0\ntoken1,alice,1\ntoken1,bob,2\n",
		"\"quoted,token\",alice,uid1,\"a, b ,,c\",extra\n",
		"a-very-long-secret-token-value-0123456789,bob\n",
		"a-very-long-secret-token-value-0123456789\"x,bob,1\n",
		"token1,alice,uid1,\"unterminated\n",
		"token1,,uid1\r\ntoken2,bob,uid2\r\n",
		"# comment,with,fields\n",
	} {
		f.Add([]byte(seed))
	}
	const path = "/fuzz/tokens.csv"
	f.Fuzz(func(t *testing.T, data []byte) {
		set, _, err := parseTokenFile(path, data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "token file "+path+": line ") {
				t.Fatalf("error %q does not name the file and line", msg)
			}
			for _, tok := range firstFields(data) {
				// Short tokens can be words of the message by chance; long ones cannot.
				if len(tok) >= 24 && strings.Contains(msg, tok) {
					t.Fatalf("error %q shows the token %q", msg, tok)
				}
			}
			return
		}
		for _, e := range set.entries {
			if e.user.Name == "" {
				t.Fatal("an entry without a user name")
			}
		}
		// The last record of each token is the one found.
		want := map[string]string{}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = -1
		for {
			rec, err := r.Read()
			if err != nil {
				break
			}
			if rec[0] != "" {
				want[rec[0]] = rec[1]
			}
		}
		for tok, name := range want {
			if u, ok := set.lookup(tok); !ok || u.Name != name {
				t.Fatalf("lookup(%q) = %q, %v; want %q", tok, u.Name, ok, name)
			}
		}
	})
}

// firstFields are the first comma-separated fields of data's lines, roughly: candidates for
// tokens, whatever the quoting.
func firstFields(data []byte) []string {
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		tok, _, _ := strings.Cut(line, ",")
		out = append(out, strings.Trim(tok, "\"\r"), tok)
	}
	return out
}
