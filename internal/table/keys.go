package table

import (
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A sort key is one keyword per printer column, computed when the object is written (the document
// builder stores them under document.FieldColumns) so that the kind's own columns sort on the
// server as the search page's six fixed ones do. Every key is text compared as bytes, in both
// stores, so a column's key is built to compare as its cell should:
//
//   - a text cell is its own key, cut to MaxKeyBytes at a character's boundary;
//   - a number is fixed-width hexadecimal with the sign bit flipped (numKey), so it compares as
//     the number; READY's "1/2" is the ready count then the total, both numbers;
//   - an IP address is its 16 bytes (an IPv4 one mapped into IPv6), in upper-case hexadecimal, so
//     10.0.0.9 comes before 10.0.0.10 and every address before a text cell such as "None";
//   - a cell that reads the time (RESTARTS' "3 (5m ago)", a Job's running DURATION, LAST SEEN,
//     LAST SCHEDULE) is keyed by what does not move: the restart count; the instant, ordered as
//     the age it prints (the most recent first); a finished Job's duration. A running Job has no
//     DURATION key;
//   - an empty cell and kubectl's placeholders (<none>, <unset>, <unknown>, <pending>, <invalid>)
//     have no key: the object sorts last in either direction, as a missing STATUS does.
//
// A key never depends on the time it is computed at, only on the object: the document keeps it
// until the object changes. NAME, STATUS and AGE have none here (sort=name, sort=status and
// sort=creationTimestamp order them).

// MaxKeyBytes bounds a text key: a longer cell (a Message, a list of images) is cut, and objects
// equal in their first MaxKeyBytes bytes tie.
const MaxKeyBytes = 256

// Key is one column's sort key.
type Key struct {
	Column string // the column's ColumnID
	Value  string
}

// ColumnID is the stable name of a column in a sort key and in the REST search's sort parameter:
// the column's name lower-cased, spaces as dashes, other characters than letters, digits and
// dashes left out ("Nominated Node" → nominated-node, "Port(s)" → ports, "Cluster-IP" →
// cluster-ip).
func ColumnID(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// unkeyed are the columns the fixed sort fields order already.
func unkeyed(name string) bool {
	return name == "Name" || name == StatusColumn || name == "Age" || name == "Created At"
}

// SortColumns are the ColumnIDs of the columns that have sort keys, in the order of Columns.
func (p *Printer) SortColumns() []string {
	var ids []string
	for _, c := range p.columns {
		if !unkeyed(c.Name) {
			ids = append(ids, ColumnID(c.Name))
		}
	}
	return ids
}

// SortKeys computes the object's sort keys, one per SortColumns member that has one, by the cell
// functions that print its Table row. It fails where Row fails.
func (p *Printer) SortKeys(obj []byte) ([]Key, error) {
	ix, err := p.Index(obj)
	return ix.Keys, err
}

// Indexed is what the document builder stores of an object's Table: its Status cell (HasStatus
// false for a kind without that column) and its sort keys.
type Indexed struct {
	Status    string
	HasStatus bool
	Keys      []Key
}

// Index computes the Status cell and the sort keys with one decode of the object (of a Pod, only
// what they read), as Status and SortKeys would each. It fails where Row fails.
func (p *Printer) Index(obj []byte) (Indexed, error) {
	if p.keys == nil {
		s, ok, err := p.Status(obj)
		return Indexed{Status: s, HasStatus: ok}, err
	}
	return p.keys(obj, false)
}

// cellKey is the key of a cell that does not read the time.
func cellKey(cell any) (string, bool) {
	switch v := cell.(type) {
	case int64:
		return numKey(v), true
	case int32:
		return numKey(int64(v)), true
	case int:
		return numKey(int64(v)), true
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	case string:
		return textKey(v)
	}
	return "", false
}

// textKey is a text cell's key: an address as its bytes, else the text cut to MaxKeyBytes.
func textKey(s string) (string, bool) {
	switch s {
	case "", "<none>", "<unset>", "<unknown>", "<pending>", "<invalid>":
		return "", false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		b := a.As16()
		return strings.ToUpper(hex.EncodeToString(b[:])), true
	}
	if len(s) > MaxKeyBytes {
		s = s[:MaxKeyBytes]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s, true
}

// numKey is the key of integers compared in turn: each as 16 hexadecimal digits of its bits with
// the sign bit flipped, so keys compare as the numbers, negative ones first.
func numKey(ns ...int64) string {
	b := make([]byte, 0, 16*len(ns))
	for _, n := range ns {
		var w [8]byte
		binary.BigEndian.PutUint64(w[:], uint64(n)^(1<<63))
		b = hex.AppendEncode(b, w[:])
	}
	return string(b)
}

// ageKey is the key of a cell printing the time since t: ordered as the age, the most recent first.
func ageKey(t time.Time) (string, bool) {
	if t.IsZero() {
		return "", false
	}
	return numKey(-t.UnixMilli()), true
}

func metaAgeKey(t metav1.Time) (string, bool) { return ageKey(t.Time) }
