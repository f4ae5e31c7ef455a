package queryapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// memberEvent is cmEvent of another member.
func memberEvent(cluster string, typ envelope.Type, name string, rv int) *envelope.Event {
	ev := cmEvent(typ, name, rv, 1)
	ev.Cluster = cluster
	return ev
}

// seedConfigMaps starts the clusters' configmaps listed (epoch 1) at resourceVersion 1, so that
// their events move their positions.
func seedConfigMaps(c interface{ Seed([]store.Watermark) }, clusters ...string) {
	var wms []store.Watermark
	for _, cl := range clusters {
		wms = append(wms, store.Watermark{Cluster: cl, Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 1, Epoch: 1})
	}
	c.Seed(wms)
}

// newMarksServer is a facade whose watch cache keeps marks of a stream of n partitions, member1's
// and member2's configmaps listed (seedConfigMaps): its fleet positions are sealed marks.
func newMarksServer(t *testing.T, n int) (string, *Server, *watchcache.Cache) {
	t.Helper()
	srv, s := newFacadeTestServer(t, &fakeStore{})
	s.positions = mustSealer(t)
	c := cacheOf(s)
	seedConfigMaps(c, "member1", "member2")
	c.ReadPartitionsForTest(n)
	return srv.URL, s, c
}

// TestSealerNonces: a position sealed again while recent is the same token; every other sealing
// takes a fresh nonce (a nonce used twice under one key would undo GCM), also once the recent
// tokens were cleared.
func TestSealerNonces(t *testing.T) {
	k := mustSealer(t)
	nonce := func(tok string) string {
		b, err := base64.RawURLEncoding.DecodeString(tok[len(sealedPrefix):])
		if err != nil {
			t.Fatal(err)
		}
		return string(b[:k.aead.NonceSize()])
	}
	if a, b := k.seal([]byte("position a")), k.seal([]byte("position a")); a != b {
		t.Errorf("the same position sealed twice: %q, %q", a, b)
	}
	seen := map[string]bool{}
	for i := range 3 * recentSeals {
		tok := k.seal(fmt.Appendf(nil, "position %d", i))
		if n := nonce(tok); seen[n] {
			t.Fatalf("nonce used twice, at sealing %d", i)
		} else {
			seen[n] = true
		}
		if plain, err := k.open(tok); err != nil || string(plain) != fmt.Sprintf("position %d", i) {
			t.Fatalf("sealing %d opens as %q, %v", i, plain, err)
		}
	}
	if len(k.recent) > recentSeals {
		t.Errorf("%d recent tokens kept, at most %d", len(k.recent), recentSeals)
	}
}

func mustSealer(t *testing.T) *sealer {
	t.Helper()
	k, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFleetPositionsAsMarks: with a watch cache reading a stream, a fleet view's resourceVersion
// is a sealed mark. It reads back to the vector it was issued as, a position below the stream's
// included; one tampered with, read back for other clusters, by a server with another key, or on a
// cache that did not read the stream from there is 410 (504 ahead of it), never another vector;
// at 1,000 clusters it stays under 1 KB where the JSON map is ~30 KB.
func TestFleetPositionsAsMarks(t *testing.T) {
	_, s, c := newMarksServer(t, 12)
	res := mustResource(t, s)
	for i := range 20 {
		c.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("o", i), 100+i))
	}
	clusters := []string{"member1", "member2"}
	for _, vec := range []rvVector{
		{"member1": 118, "member2": 119}, // the stream's positions
		{"member1": 110, "member2": 119}, // a LIST behind the stream for member1
		{"member1": 0, "member2": 0},
	} {
		tok := s.encodeRV(view{}, res, vec)
		if !strings.HasPrefix(tok, sealedPrefix) {
			t.Fatalf("%v written as %q, not sealed", vec, tok)
		}
		got, st := s.decodeRV(t.Context(), tok, view{}, res, clusters)
		if st != nil || fmt.Sprint(got) != fmt.Sprint(vec) {
			t.Errorf("%v read back as %v, %v", vec, got, st)
		}
		if tok2 := s.encodeRV(view{}, res, vec); tok2 != tok {
			// Watchers at one position share its token (sealer.recent).
			t.Errorf("two sealings of %v in a row are two tokens: %q, %q", vec, tok, tok2)
		}
		// Another view's clusters (the subject's, or the fleet's, changed): 410.
		if _, st := s.decodeRV(t.Context(), tok, view{}, res, clusters[:1]); st == nil || st.Code != http.StatusGone {
			t.Errorf("%v read back for member1 alone: %v, want 410", vec, st)
		}
		// Tampered with: 410 (as one sealed with another key: the client lists again).
		// The middle character becomes the next one of the alphabet: always another valid one (a
		// bit flipped could leave the alphabet, and a fixed stand-in could be the character itself).
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		b := []byte(tok)
		at := strings.IndexByte(alphabet, b[len(b)/2])
		if at < 0 {
			t.Fatalf("%q: %q is not of the base64url alphabet", tok, b[len(b)/2])
		}
		b[len(b)/2] = alphabet[(at+1)%len(alphabet)]
		if _, st := s.decodeRV(t.Context(), string(b), view{}, res, clusters); st == nil || st.Code != http.StatusGone {
			t.Errorf("tampered %q: %v, want 410", b, st)
		}
	}
	tok := s.encodeRV(view{}, res, rvVector{"member1": 118, "member2": 119})

	// Another key: 410.
	_, other := newFacadeTestServer(t, &fakeStore{})
	other.positions = mustSealer(t)
	if _, st := other.decodeRV(t.Context(), tok, view{}, res, clusters); st == nil || st.Code != http.StatusGone {
		t.Errorf("another key: %v, want 410", st)
	}
	// The same key on a replica that started since, from an index already at 105: it reads the
	// same records, but its positions before 105 are the index's, not the records'. A position
	// from there is 410; one from after reads back the same.
	other.positions = s.positions
	oc := cacheOf(other)
	seedConfigMaps(oc, "member1", "member2")
	oc.Seed([]store.Watermark{{Cluster: "member1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 105, Epoch: 1}})
	oc.ReadPartitionsForTest(12)
	for i := range 20 {
		oc.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("o", i), 100+i))
	}
	early := s.encodeRV(view{}, res, rvVector{"member1": 102, "member2": 103})
	if got, st := other.decodeRV(t.Context(), early, view{}, res, clusters); st == nil || st.Code != http.StatusGone {
		t.Errorf("a position from before the replica's start: %v, %v; want 410", got, st)
	}
	if got, st := other.decodeRV(t.Context(), tok, view{}, res, clusters); st != nil || got["member1"] != 118 || got["member2"] != 119 {
		t.Errorf("a position from after the replica's start: %v, %v", got, st)
	}
	// Ahead of what a replica has read: 504 once the wait ends, never 410.
	_, behind := newFacadeTestServer(t, &fakeStore{})
	behind.positions = s.positions
	bhc := cacheOf(behind)
	seedConfigMaps(bhc, "member1", "member2")
	bhc.ReadPartitionsForTest(12)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, st := behind.decodeRV(ctx, tok, view{}, res, clusters); st == nil || st.Code != http.StatusGatewayTimeout {
		t.Errorf("a position ahead of the replica: %v, want 504", st)
	}

	// 1,000 clusters, each with events: the sealed token against the JSON map.
	big, bs := newFacadeTestServer(t, &fakeStore{})
	_ = big
	bs.positions = mustSealer(t)
	bc := cacheOf(bs)
	var fleet []string
	for i := range 1000 {
		fleet = append(fleet, fmt.Sprintf("member-%04d", i))
	}
	seedConfigMaps(bc, fleet...)
	bc.ReadPartitionsForTest(12)
	vec := rvVector{}
	for i, cl := range fleet {
		for j := range 3 {
			bc.Apply(memberEvent(cl, envelope.Added, fmt.Sprint("o", j), 1_000_000+10*i+j))
		}
		vec[cl] = int64(1_000_000 + 10*i + 2)
	}
	vec["member-0007"] = 1_000_071 // one cluster a LIST shows behind the stream
	sealed, plain := bs.encodeRV(view{}, res, vec), vec.encode(view{})
	t.Logf("1,000 clusters: sealed %d bytes, JSON map %d bytes", len(sealed), len(plain))
	if len(sealed) > 1024 {
		t.Errorf("sealed position of 1,000 clusters: %d bytes, want ≤ 1 KB", len(sealed))
	}
	slices.Sort(fleet)
	if got, st := bs.decodeRV(t.Context(), sealed, view{}, res, fleet); st != nil || fmt.Sprint(got) != fmt.Sprint(vec) {
		t.Errorf("1,000 clusters read back: %v", st)
	}
}

// TestFleetWatchResumesFromSealedPositions: every event and bookmark of a fleet watch carries a
// sealed position; a watch resumed from any event's gets exactly the events after it — none it had,
// none missing — including after a SYNC moved a member without an event.
func TestFleetWatchResumesFromSealedPositions(t *testing.T) {
	url, s, c := newMarksServer(t, 4)
	for i := range 4 {
		c.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("a", i), 10+i))
	}
	type seen struct{ name, rv string }
	read := func(from string, n int) []seen {
		t.Helper()
		got := watchNames(t, url+"/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="+from, n)
		out := make([]seen, len(got))
		for i, g := range got {
			f := strings.Fields(g)
			out[i] = seen{f[1], f[2]}
		}
		return out
	}
	done := make(chan []seen)
	go func() {
		done <- read(s.encodeRV(view{}, mustResource(t, s), rvVector{"member1": 12, "member2": 13}), 6)
	}()
	time.Sleep(200 * time.Millisecond)
	for i := 4; i < 10; i++ {
		cl := []string{"member1", "member2"}[i%2]
		c.Apply(memberEvent(cl, envelope.Added, fmt.Sprint("a", i), 10+i))
		if i == 6 {
			sync := cmSync(1, "40") // member1's list completes: its position moves without an event
			c.Apply(sync)
		}
	}
	var all []seen
	select {
	case all = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no events")
	}
	names := func(ss []seen) []string {
		var out []string
		for _, x := range ss {
			out = append(out, x.name)
			if !strings.HasPrefix(x.rv, sealedPrefix) || len(x.rv) > 200 {
				t.Errorf("event %s carries %q: not a sealed position", x.name, x.rv)
			}
		}
		return out
	}
	if got, want := names(all), []string{"a4", "a5", "a6", "a7", "a8", "a9"}; !slices.Equal(got, want) {
		t.Fatalf("watch: %v, want %v", got, want)
	}
	for k := range all[:len(all)-1] {
		if got, want := names(read(all[k].rv, len(all)-k-1)), names(all[k+1:]); !slices.Equal(got, want) {
			t.Errorf("resumed after %s: %v, want %v", all[k].name, got, want)
		}
	}
}

func mustResource(t *testing.T, s *Server) apiResource {
	t.Helper()
	res, ok := s.catalog.lookup("", "", "v1", "configmaps", nil)
	if !ok {
		t.Fatal("configmaps not in the test catalog")
	}
	return res
}

// TestQualifiedWatchPositionKeepsUnwatchedClusters: a qualified view's watch of one object
// (fieldSelector metadata.name=<name>_<cluster>) reads one cluster's pair, but its position is a
// vector of every cluster of the view. The other clusters' entries must read back to what the
// watch started from, however their stable positions move later; every event's position must
// decode to the vector it represents.
func TestQualifiedWatchPositionKeepsUnwatchedClusters(t *testing.T) {
	url, s, c := newMarksServer(t, 1) // one partition: member1 and member2 share it
	for i := range 4 {
		c.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("a", i), 10+i))
	}
	res := mustResource(t, s)
	qv := view{qualified: true}
	from := s.encodeRV(qv, res, rvVector{"member1": 12, "member2": 13})
	done := make(chan []string)
	go func() {
		done <- watchNames(t, url+"/qualified/api/v1/namespaces/shop/configmaps?watch=1&fieldSelector=metadata.name%3Dx_member1&resourceVersion="+from, 2)
	}()
	time.Sleep(200 * time.Millisecond)
	c.Apply(memberEvent("member1", envelope.Added, "x", 20))
	time.Sleep(200 * time.Millisecond)
	c.Apply(memberEvent("member2", envelope.Added, "y", 21)) // member2 moves: the watch does not read it
	c.Apply(memberEvent("member1", envelope.Modified, "x", 22))
	var got []string
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("no events")
	}
	want := []rvVector{{"member1": 20, "member2": 13}, {"member1": 22, "member2": 13}}
	for i, g := range got {
		rv := strings.Fields(g)[2]
		v, st := s.decodeRV(t.Context(), rv, qv, res, []string{"member1", "member2"})
		if st != nil || fmt.Sprint(v) != fmt.Sprint(want[i]) {
			t.Errorf("event %q: position reads back as %v, %v; want %v", g, v, st, want[i])
		}
	}
}

// TestResumedReadAcrossASync: a resumed watch's first
// read replays member2's events across member1's SYNC (same partition, no event of member1): every
// event's position keeps member1 where the client had it (the read names member1 moved without an
// event since the watch's start, Watch.From), not where the mark of the later event places it.
func TestResumedReadAcrossASync(t *testing.T) {
	url, s, c := newMarksServer(t, 1)
	for i := range 4 {
		c.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("a", i), 10+i))
	}
	res := mustResource(t, s)
	from := s.encodeRV(view{}, res, rvVector{"member1": 12, "member2": 13})
	c.Apply(memberEvent("member2", envelope.Added, "b1", 20))
	c.Apply(cmSync(1, "40")) // member1's list completes: its position moves without an event
	c.Apply(memberEvent("member2", envelope.Added, "b2", 21))
	got := watchNames(t, url+"/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="+from, 2)
	for _, g := range got {
		rv := strings.Fields(g)[2]
		if v, st := s.decodeRV(t.Context(), rv, view{}, res, []string{"member1", "member2"}); st != nil || v["member1"] != 12 {
			t.Errorf("event %q: position reads back as %v, %v; want member1 at 12", g, v, st)
		}
		// Only member1 is written beside the mark: the read named it (Watch.From), where without
		// knowing the moves since the start every cluster of the partition would be.
		if plain, err := s.positions.open(rv); err != nil {
			t.Errorf("event %q: %v", g, err)
		} else if sp, err := unmarshalPosition(plain); err != nil || len(sp.over) != 1 || sp.over["member1"] != 12 {
			t.Errorf("event %q: beside the mark %v (%v), want member1 at 12 alone", g, sp.over, err)
		}
	}
}

// TestUnplacedMoveIsWrittenBesideTheMark: an event no mark places (made by a record of another
// partition: a PURGE reaches every resource of its kind) keeps its cluster beside the mark, so the
// position still reads back to the vector.
func TestUnplacedMoveIsWrittenBesideTheMark(t *testing.T) {
	_, s, c := newMarksServer(t, 4)
	for i := range 4 {
		c.Apply(memberEvent([]string{"member1", "member2"}[i%2], envelope.Added, fmt.Sprint("a", i), 10+i))
	}
	res := mustResource(t, s)
	vec := rvVector{"member1": 12, "member2": 13}
	wp := s.newWatchPosition(view{}, res, vec, []store.Pair{res.pair("member1"), res.pair("member2")})
	vec["member1"] = 50
	wp.moved("member1", 12, 50, 50, -1)
	if wp.over["member1"] != 50 {
		t.Errorf("beside the mark: %v, want member1 at 50", wp.over)
	}
	if got, st := s.decodeRV(t.Context(), wp.encode(view{}, vec), view{}, res, []string{"member1", "member2"}); st != nil || fmt.Sprint(got) != fmt.Sprint(vec) {
		t.Errorf("position reads back as %v, %v; want %v", got, st, vec)
	}
}
