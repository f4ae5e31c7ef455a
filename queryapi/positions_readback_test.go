package queryapi

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// checkPositionsReadBack runs the watch loop's position keeping (watch.go: read, event, settled)
// against 300 random streams of five members (events, SYNCs that move a position without an
// event, one to three partitions) and checks that the positions it writes read back to the watch's
// vector: at every bookmark, and at events as mode says (0: none, 1: after the first read, 2: all,
// the first read's too, where a resumed watch replays events across other members' SYNCs).
// watched picks the clusters the watch reads (all of them: a fleet watch; one: a qualified name).
func checkPositionsReadBack(t *testing.T, mode int, watched func(rng *rand.Rand, clusters []string) []string) {
	overAfterSettled, settledN := 0, 0
	defer func() {
		t.Logf("clusters written beside the mark after a read: %.2f on average", float64(overAfterSettled)/float64(settledN))
	}()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		_, s := newFacadeTestServer(t, &fakeStore{})
		s.positions = mustSealer(t)
		c := cacheOf(s)
		clusters := []string{"member1", "member2", "member3", "member4", "member5"}
		seedConfigMaps(c, clusters...)
		c.ReadPartitionsForTest(1 + rng.IntN(3))
		res := mustResource(t, s)
		vw := view{}
		pos := rvVector{}
		for _, cl := range clusters {
			pos[cl] = 1
		}
		var pairs []store.Pair
		for _, cl := range watched(rng, clusters) {
			pairs = append(pairs, res.pair(cl))
		}
		from := map[store.Pair]int64{}
		for _, p := range pairs {
			from[p] = pos[p.Cluster]
		}
		feed, err := c.Start(t.Context(), pairs, from)
		if err != nil {
			t.Fatal(err)
		}
		at := s.newWatchPosition(vw, res, pos, pairs)
		feed.From(at.mark)
		covered := map[store.Pair]bool{}
		for _, p := range pairs {
			covered[p] = true
		}
		reads := 0
		rv := map[string]int{}
		epoch := map[string]int64{}
		for _, cl := range clusters {
			rv[cl], epoch[cl] = 10, 1
		}
		check := func(step int, what string) {
			tok := at.encode(vw, pos)
			got, st := s.decodeRV(t.Context(), tok, vw, res, clusters)
			if st != nil || fmt.Sprint(got) != fmt.Sprint(pos) {
				t.Fatalf("seed %d step %d (%s): position %v reads back as %v, %v", seed, step, what, pos, got, st)
			}
		}
		for step := range 200 {
			cl := clusters[rng.IntN(len(clusters))]
			switch k := rng.IntN(10); {
			case k < 6:
				rv[cl]++
				c.Apply(memberEvent(cl, envelope.Added, fmt.Sprint("o", rng.IntN(4)), rv[cl]))
			case k < 7:
				epoch[cl]++
				rv[cl] += rng.IntN(2)
				sync := cmSync(epoch[cl], fmt.Sprint(rv[cl]))
				sync.Cluster = cl
				c.Apply(sync)
			default:
				firstRead := reads == 0
				reads++
				evs, stable, _, err := feed.Read()
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				at.read(feed.Unevented(), pos)
				for _, e := range evs {
					if !covered[e.Pair] {
						continue
					}
					old := pos[e.Pair.Cluster]
					pos[e.Pair.Cluster] = max(old, e.Stable)
					at.moved(e.Pair.Cluster, old, pos[e.Pair.Cluster], e.Stable, e.Offset)
					if (mode == 2 || (mode == 1 && !firstRead)) && rng.IntN(2) == 0 {
						check(step, "event")
					}
				}
				settleRead(pos, at, stable, feed.Mark())
				overAfterSettled += len(at.over)
				settledN++
				if rng.IntN(2) == 0 {
					check(step, "bookmark")
				}
			}
		}
		feed.Stop()
	}
}

// TestWatchPositionsReadBack: a watch's sealed positions read back to its vector, kept incrementally
// from the moved pairs each read returns.
func TestWatchPositionsReadBack(t *testing.T) {
	all := func(_ *rand.Rand, clusters []string) []string { return clusters }
	t.Run("fleet watch", func(t *testing.T) { checkPositionsReadBack(t, 1, all) })
	t.Run("events of the first read", func(t *testing.T) { checkPositionsReadBack(t, 2, all) })
	t.Run("a qualified name's watch reads one cluster", func(t *testing.T) {
		checkPositionsReadBack(t, 2, func(rng *rand.Rand, clusters []string) []string { return clusters[rng.IntN(len(clusters)):][:1] })
	})
}
