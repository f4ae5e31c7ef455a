package queryapi

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// Fleet resourceVersions that do not grow with the fleet (issue 25).
//
// A fleet view's position is one resourceVersion per cluster, and was written as such (base64url
// of the JSON map, as Karmada writes its multi-cluster resourceVersion): ~33 KB at 1,000 clusters,
// in every LIST, every watch event and every bookmark. With a watch cache reading the stream, it is
// written as a mark of the stream instead (watchcache.Mark: per partition, an offset, which every
// replica reading the same stream reads back to the same per-cluster positions), plus the few
// clusters the mark does not place (a cluster whose LIST position is below the stream's, one moved
// by a SYNC a watch has not bookmarked yet) and a sum of the whole vector. A replica that reads the
// mark back to another vector (it started later, from the index; the view's clusters changed)
// answers 410 and the client lists again: never a resume from the wrong place.
//
// The token is sealed (AES-GCM, a random nonce each time): offsets count every record of a
// partition, every cluster's, and a subject must not learn how busy the clusters it cannot see
// are from how its resourceVersion moves. Replicas read each other's tokens when they share the
// key (--continue-key-file, as continue tokens need); the fixed-width offsets keep a token's length from saying more.

// sealedPrefix starts a sealed position; a JSON map's base64url starts with "ey".
const sealedPrefix = "~"

// tokenVersion is the first byte of a sealed position.
const tokenVersion = 1

// positionAAD binds a sealed token to its use: one sealed for anything else does not open.
var positionAAD = []byte("kubesearch fleet resourceVersion")

// sealer seals and opens positions.
type sealer struct {
	aead cipher.AEAD
	// recent are the tokens sealed last, by plaintext: the watchers of one view move through the
	// same positions event by event (100 fleet watchers seal each one 100 times), so a position is
	// sealed once and its token handed to each. Equal positions then read as equal tokens, which
	// tells a holder nothing its own position does not. Bounded: cleared when full.
	mu     sync.Mutex
	recent map[string]string
}

// recentSeals bounds sealer.recent: enough for the positions of every view watched at once
// between two events, small enough to clear without a thought.
const recentSeals = 512

// newSealer derives the key from secret (--continue-key-file, which replicas share), or makes one
// up when secret is nil: positions then resume on this process only.
func newSealer(secret []byte) (*sealer, error) {
	key := make([]byte, 32)
	if secret == nil {
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	} else {
		// Its own key, not the continue tokens' (one secret, two uses that must not mix).
		sum := sha256.Sum256(append([]byte("kubesearch fleet resourceVersion key\x00"), secret...))
		key = sum[:]
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, recent: map[string]string{}}, nil
}

func (k *sealer) seal(plain []byte) string {
	k.mu.Lock()
	token, ok := k.recent[string(plain)]
	k.mu.Unlock()
	if ok {
		return token
	}
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	token = sealedPrefix + base64.RawURLEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, positionAAD))
	k.mu.Lock()
	if len(k.recent) >= recentSeals {
		clear(k.recent)
	}
	k.recent[string(plain)] = token
	k.mu.Unlock()
	return token
}

func (k *sealer) open(token string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(token[len(sealedPrefix):])
	if err != nil || len(b) < k.aead.NonceSize() {
		return nil, errors.New("not a resourceVersion this server (or a replica sharing its --continue-key-file) issued")
	}
	plain, err := k.aead.Open(nil, b[:k.aead.NonceSize()], b[k.aead.NonceSize():], positionAAD)
	if err != nil {
		return nil, errors.New("not a resourceVersion this server (or a replica sharing its --continue-key-file) issued")
	}
	return plain, nil
}

// sealedPosition is what a sealed token holds.
type sealedPosition struct {
	mark watchcache.Mark
	over rvVector // the clusters the mark does not place
	sum  uint64   // vectorSum of the whole vector
}

// offsetBytes is the width of an offset in a token: fixed, so its length says nothing of how many
// records a partition holds (2^48 records).
const offsetBytes = 6

// marshal writes the partitions and clusters in order: one position is one plaintext, so that
// sealer.recent finds it again.
func (p sealedPosition) marshal() []byte {
	b := []byte{tokenVersion}
	b = binary.AppendUvarint(b, uint64(len(p.mark)))
	var qa [64]int // on the stack for up to 64 partitions
	qs := qa[:0]
	for q := range p.mark {
		qs = append(qs, q)
	}
	slices.Sort(qs)
	for _, q := range qs {
		b = binary.AppendUvarint(b, uint64(q))
		var w [8]byte
		binary.BigEndian.PutUint64(w[:], uint64(p.mark[q]))
		b = append(b, w[8-offsetBytes:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(p.over)))
	var ca [16]string
	cs := ca[:0]
	for c := range p.over {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
		b = binary.AppendUvarint(b, uint64(p.over[c]))
	}
	return binary.BigEndian.AppendUint64(b, p.sum)
}

func unmarshalPosition(b []byte) (sealedPosition, error) {
	bad := errors.New("a malformed sealed resourceVersion")
	if len(b) == 0 || b[0] != tokenVersion {
		return sealedPosition{}, bad
	}
	b = b[1:]
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	p := sealedPosition{mark: watchcache.Mark{}, over: rvVector{}}
	n, ok := uvarint()
	for i := uint64(0); ok && i < n; i++ {
		var q uint64
		if q, ok = uvarint(); ok && q <= math.MaxInt32 && len(b) >= offsetBytes {
			var w [8]byte
			copy(w[8-offsetBytes:], b[:offsetBytes])
			p.mark[int(q)] = int64(binary.BigEndian.Uint64(w[:]))
			b = b[offsetBytes:]
		} else {
			ok = false
		}
	}
	if ok {
		n, ok = uvarint()
	}
	for i := uint64(0); ok && i < n; i++ {
		var l, rv uint64
		if l, ok = uvarint(); !ok || uint64(len(b)) < l {
			ok = false
			break
		}
		c := string(b[:l])
		b = b[l:]
		if rv, ok = uvarint(); ok && rv <= math.MaxInt64 {
			p.over[c] = int64(rv)
		} else {
			ok = false
		}
	}
	if !ok || len(b) != 8 {
		return sealedPosition{}, bad
	}
	p.sum = binary.BigEndian.Uint64(b)
	return p, nil
}

// entrySum is one cluster's share of a vectorSum.
func entrySum(cluster string, rv int64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(cluster))
	x := h.Sum64() ^ uint64(rv)*0x9e3779b97f4a7c15
	// splitmix64's finalizer: every bit of cluster and rv moves every bit of the share.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// vectorSum sums a vector, so that a position read back from a mark is checked against the one
// issued. XOR of the entries' shares: a watch moving one cluster updates it in O(1).
func vectorSum(v rvVector) uint64 {
	var s uint64
	for c, rv := range v {
		s ^= entrySum(c, rv)
	}
	return s
}

// marks is what fleet positions need of the watch cache (package watchcache, marks.go).
type marks interface {
	MarkOf(pos map[store.Pair]int64) watchcache.Mark
	At(ctx context.Context, m watchcache.Mark, pairs []store.Pair) (map[store.Pair]int64, error)
	PartitionOf(p store.Pair) int
}

// encodeRV writes a position for a view: the member's resourceVersion in a one-cluster view; in a
// fleet view a sealed mark when the watch cache reads a stream, else the JSON map.
func (s *Server) encodeRV(vw view, res apiResource, vec rvVector) string {
	if !vw.vector() || s.cache == nil {
		return vec.encode(vw)
	}
	pos := make(map[store.Pair]int64, len(vec))
	pairs := make([]store.Pair, 0, len(vec))
	for c, rv := range vec {
		p := res.pair(c)
		pos[p] = rv
		pairs = append(pairs, p)
	}
	m := s.cache.MarkOf(pos)
	if m == nil {
		return vec.encode(vw)
	}
	at, err := s.cache.At(noWait, m, pairs)
	if err != nil {
		return vec.encode(vw)
	}
	sp := sealedPosition{mark: m, over: rvVector{}, sum: vectorSum(vec)}
	for c, rv := range vec {
		if at[res.pair(c)] != rv {
			sp.over[c] = rv
		}
	}
	return s.positions.seal(sp.marshal())
}

// decodeRV reads a position a client sends back for a view's clusters: 400 for what is no
// resourceVersion, 410 when a sealed one cannot be read back to the vector it was issued as, 504
// when the stream here has not reached it yet.
func (s *Server) decodeRV(ctx context.Context, token string, vw view, res apiResource, clusters []string) (rvVector, *metav1.Status) {
	if !vw.vector() || len(token) < len(sealedPrefix) || token[:len(sealedPrefix)] != sealedPrefix {
		v, err := parseRV(token, vw)
		if err != nil {
			return nil, newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, "resourceVersion: "+err.Error())
		}
		return v, nil
	}
	plain, err := s.positions.open(token)
	if err != nil {
		// Sealed with another key (a replica without the shared --continue-key-file, or this one
		// before a restart without it) or altered: the client can only list again.
		return nil, newStatus(http.StatusGone, metav1.StatusReasonExpired, "too old resource version: "+err.Error()+"; list again")
	}
	sp, err := unmarshalPosition(plain)
	if err != nil {
		return nil, newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, "resourceVersion: "+err.Error())
	}
	gone := func(why string) *metav1.Status {
		return newStatus(http.StatusGone, metav1.StatusReasonExpired, "too old resource version: "+why+"; list again")
	}
	if s.cache == nil {
		return nil, gone("this server has no watch cache to read the position back")
	}
	pairs := make([]store.Pair, 0, len(clusters))
	for _, c := range clusters {
		if _, ok := sp.over[c]; !ok {
			pairs = append(pairs, res.pair(c))
		}
	}
	at, err := s.cache.At(ctx, sp.mark, pairs)
	switch {
	case errors.Is(err, watchcache.ErrTooNew):
		st := newStatus(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, err.Error())
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}}
		return nil, st
	case err != nil:
		return nil, gone(err.Error())
	}
	v := rvVector{}
	for _, c := range clusters {
		if rv, ok := sp.over[c]; ok {
			v[c] = rv
		} else {
			v[c] = at[res.pair(c)]
		}
	}
	if vectorSum(v) != sp.sum {
		// Issued for other clusters (the view changed, or another subject's), another resource,
		// or read back differently here (a replica that started after the position was issued).
		return nil, gone("the position does not read back here to the one issued (the clusters you may see, the resource, or this replica's start differ)")
	}
	return v, nil
}

// watchPosition keeps a fleet watch's sealed position in step with its vector without taking the
// watch cache's lock per event (which every watch and the stream's reader share: at 1,000 clusters
// and 100 watchers, asking it per event serialized them all). An event moves the mark to its record,
// and the event's own pair is at the event's stable position there; no other pair of the view
// moves in between but by its own events, which the watch reads in order, or by a move without an
// event, which each read names (watchcache.Unevented): those pairs are written beside the mark until
// the read ends. After each read, the watch's vector is the pairs' stable positions at the read's
// mark. At is asked only where the cache cannot tell (the first read, a partition read from before
// what it keeps).
type watchPosition struct {
	s    *Server
	res  apiResource
	mark watchcache.Mark
	over rvVector
	sum  uint64
	// partition is each cluster's; byPartition the view's clusters per partition; dirty the
	// partitions to check with At at the next encoding; unevented the clusters moved without an
	// event during the current read.
	partition   map[string]int
	byPartition map[int][]string
	dirty       map[int]bool
	unevented   map[string]bool
}

// newWatchPosition starts tracking a watch of pairs at vec: nil (the JSON map, or a one-cluster
// view's resourceVersion) when the view has one cluster or the cache reads no stream. The view's
// clusters the watch does not read (a qualified name's watch reads one) stay where vec has them,
// written beside the mark: the watch sees none of their moves.
func (s *Server) newWatchPosition(vw view, res apiResource, vec rvVector, pairs []store.Pair) *watchPosition {
	if !vw.vector() || s.cache == nil {
		return nil
	}
	pos := make(map[store.Pair]int64, len(vec))
	wp := &watchPosition{s: s, res: res, over: rvVector{}, sum: vectorSum(vec),
		partition: map[string]int{}, byPartition: map[int][]string{}, dirty: map[int]bool{}, unevented: map[string]bool{}}
	read := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		read[p.Cluster] = true
	}
	for c, rv := range vec {
		if !read[c] {
			wp.over[c] = rv
			continue
		}
		p := res.pair(c)
		pos[p] = rv
		q := s.cache.PartitionOf(p)
		if q < 0 {
			return nil
		}
		wp.partition[c] = q
		wp.byPartition[q] = append(wp.byPartition[q], c)
		wp.dirty[q] = true
	}
	if wp.mark = s.cache.MarkOf(pos); wp.mark == nil {
		return nil
	}
	return wp
}

// read starts a read of the watch: u names the pairs moved without events since the last one
// (since the watch's start for its first read, watchcache.Watch.From), written beside the mark
// until the read ends. A partition whose moves the cache no longer knows that far back has all its
// clusters written beside the mark for the read: checking them at the mark as it is now would be
// wrong once a later event of the read moves the mark past a move of theirs.
func (wp *watchPosition) read(u watchcache.Unevented, vec rvVector) {
	if wp == nil {
		return
	}
	for _, p := range u.Pairs {
		wp.unevented[p.Cluster] = true
		wp.over[p.Cluster] = vec[p.Cluster]
	}
	for _, q := range u.Partitions {
		for _, c := range wp.byPartition[q] {
			wp.unevented[c] = true
			wp.over[c] = vec[c]
		}
	}
}

// moved notes a cluster's position moving from old to rv, by an event at offset off whose pair's
// stable position there is stable.
func (wp *watchPosition) moved(cluster string, old, rv, stable, off int64) {
	if wp == nil {
		return
	}
	if old != rv {
		wp.sum ^= entrySum(cluster, old) ^ entrySum(cluster, rv)
	}
	q, ok := wp.partition[cluster]
	if !ok {
		return
	}
	if off < 0 {
		// Moved by a record of another partition (a PURGE reaches every resource of its kind): no
		// mark of the cluster's places it, so it is written beside the mark until the read ends.
		wp.unevented[cluster] = true
		wp.over[cluster] = rv
		return
	}
	wp.mark[q] = max(wp.mark[q], off+1)
	if rv == stable && !wp.unevented[cluster] {
		delete(wp.over, cluster)
	} else {
		wp.over[cluster] = rv
	}
}

// settleRead ends a watch's read at vec: every pair is at its stable position once the read's
// events are sent, so a sealed position then is the read's mark m alone, and a bookmark says so.
// stable holds the pairs that moved since the last read (all at the first): the others are where
// that read left them. wp is nil for a view without a sealed position.
func settleRead(vec rvVector, wp *watchPosition, stable map[store.Pair]int64, m watchcache.Mark) {
	old := make(rvVector, len(stable))
	byCluster := make(map[string]int64, len(stable))
	for p, st := range stable {
		old[p.Cluster] = vec[p.Cluster]
		vec[p.Cluster] = max(vec[p.Cluster], st)
		byCluster[p.Cluster] = st
	}
	wp.settled(m, vec, byCluster, old)
}

// settled ends a read: the watch has raised the clusters that moved since the last read (old
// their positions before) to their stable positions at the read's mark m, as stable gives them;
// the others were settled by an earlier read and have not moved since.
func (wp *watchPosition) settled(m watchcache.Mark, vec rvVector, stable map[string]int64, old rvVector) {
	if wp == nil {
		return
	}
	for c, rv := range old {
		if vec[c] != rv {
			wp.sum ^= entrySum(c, rv) ^ entrySum(c, vec[c])
		}
	}
	for q, off := range m {
		if _, ok := wp.byPartition[q]; ok {
			wp.mark[q] = max(wp.mark[q], off)
		}
	}
	for c, st := range stable {
		if st != vec[c] {
			wp.over[c] = vec[c]
		} else {
			delete(wp.over, c)
		}
	}
	clear(wp.unevented)
	// The first read's stable holds every pair: the clusters' places beside the mark are exact
	// now, and the start's check of every partition (dirty) is done.
	clear(wp.dirty)
}

// noWait is a context already done: At answers from what the cache has now, without waiting.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// encode writes the position vec (the watch's vector now) for the view.
func (wp *watchPosition) encode(vw view, vec rvVector) string {
	if wp == nil {
		return vec.encode(vw)
	}
	for q := range wp.dirty {
		cs := wp.byPartition[q]
		pairs := make([]store.Pair, len(cs))
		for i, c := range cs {
			pairs[i] = wp.res.pair(c)
		}
		at, err := wp.s.cache.At(noWait, wp.mark, pairs)
		for _, c := range cs {
			if err == nil && at[wp.res.pair(c)] == vec[c] && !wp.unevented[c] {
				delete(wp.over, c)
			} else {
				wp.over[c] = vec[c]
			}
		}
	}
	clear(wp.dirty)
	return wp.s.positions.seal(sealedPosition{mark: wp.mark, over: wp.over, sum: wp.sum}.marshal())
}
