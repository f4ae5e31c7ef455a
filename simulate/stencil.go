package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A stencil is an object's JSON with holes: encoded once per (kind, app, variant), then filled per
// object by copying its parts and the values of its holes, which costs a copy of the bytes instead
// of an encoding (a Pod's JSON is several KB, and a fleet has millions of them).
//
// A hole is written into the object before it is encoded as the text @@NAME@@ inside a string
// value; a hole whose name starts with '#' must be a whole string value ("@@#NAME@@") and is filled
// with a bare number, quotes included in the hole. Values are written as they are: they must not
// need JSON escaping (names, uids, times, addresses, numbers).
type stencil struct {
	parts [][]byte // len(holes)+1
	holes []hole
}

type hole int

// The holes of every kind's stencils.
const (
	hName hole = iota
	hUID
	hRV
	hCreated
	hVersion   // the app's version in this cluster
	hZone      // a Pod's zone
	hNode      // a Pod's node
	hHostIP    // a Pod's node's address
	hPodIP     // a Pod's address
	hOwnerUID  // the owning object's uid
	hRestarts  // #: a Pod's main container's restarts
	hGen       // #: metadata.generation
	hRevision  // a ConfigMap's revision line
	hCount     // #: an Event's count
	hLast      // an Event's lastTimestamp
	hAboutName // the object an Event is about
	hAboutUID
	hClusterIP  // a Service's address
	hAPIVersion // a custom resource's apiVersion, which differs between clusters
	holeCount
)

var holeNames = [holeCount]string{
	hName: "NAME", hUID: "UID", hRV: "RV", hCreated: "CREATED", hVersion: "VERSION", hZone: "ZONE", hNode: "NODE",
	hHostIP: "HOSTIP", hPodIP: "PODIP", hOwnerUID: "OWNERUID", hRestarts: "#RESTARTS", hGen: "#GEN", hRevision: "REVISION",
	hCount: "#COUNT", hLast: "LAST", hAboutName: "ABOUTNAME", hAboutUID: "ABOUTUID", hClusterIP: "CLUSTERIP",
	hAPIVersion: "APIVERSION",
}

// mark is the text of a hole placed in an object before it is encoded.
func mark(h hole) string { return "@@" + holeNames[h] + "@@" }

// newStencil encodes obj and finds its holes.
func newStencil(obj any) (*stencil, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	byName := map[string]hole{}
	for h, n := range holeNames {
		byName[n] = hole(h)
	}
	s := &stencil{}
	rest := raw
	for {
		i := bytes.Index(rest, []byte("@@"))
		if i < 0 {
			break
		}
		j := bytes.Index(rest[i+2:], []byte("@@"))
		if j < 0 {
			return nil, fmt.Errorf("unterminated hole in %.80s", rest[i:])
		}
		name := string(rest[i+2 : i+2+j])
		h, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("unknown hole %q", name)
		}
		start, end := i, i+2+j+2
		if strings.HasPrefix(name, "#") {
			if start == 0 || rest[start-1] != '"' || end >= len(rest) || rest[end] != '"' {
				return nil, fmt.Errorf("hole %s is not a whole string value", name)
			}
			start, end = start-1, end+1
		}
		s.parts = append(s.parts, bytes.Clone(rest[:start]))
		s.holes = append(s.holes, h)
		rest = rest[end:]
	}
	s.parts = append(s.parts, bytes.Clone(rest))
	return s, nil
}

// fill appends the object with the holes filled from values.
func (s *stencil) fill(dst []byte, values *[holeCount][]byte) []byte {
	for i, h := range s.holes {
		dst = append(dst, s.parts[i]...)
		dst = append(dst, values[h]...)
	}
	return append(dst, s.parts[len(s.parts)-1]...)
}

// size is the length of the stencil's own bytes, without the holes' values.
func (s *stencil) size() int {
	n := 0
	for _, p := range s.parts {
		n += len(p)
	}
	return n
}
