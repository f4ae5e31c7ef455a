package simulate

import "time"

// mix hashes values into one (splitmix64 steps): every identity of the fleet is a hash of the seed
// and what the object is, so it is the same in every run of a seed and cheap to compute again
// instead of being kept.
func mix(vals ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, v := range vals {
		h ^= v
		h += 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

const hexDigits = "0123456789abcdef"

// appendUID appends a version 4 UUID made of h1 and h2.
func appendUID(dst []byte, h1, h2 uint64) []byte {
	var b [16]byte
	for i := range 8 {
		b[i], b[8+i] = byte(h1>>(8*i)), byte(h2>>(8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return dst
}

// safeChars are the characters Kubernetes draws generated name suffixes and pod-template-hashes
// from (no vowels, no confusable digits).
const safeChars = "bcdfghjklmnpqrstvwxz2456789"

func appendSafe(dst []byte, h uint64, n int) []byte {
	for range n {
		dst = append(dst, safeChars[h%uint64(len(safeChars))])
		h /= uint64(len(safeChars))
	}
	return dst
}

// podTemplateHash is a ReplicaSet's pod-template-hash: ten safe characters.
func podTemplateHash(h uint64) string { return string(appendSafe(nil, h, 10)) }

// rvEpoch is where the simulated members' resourceVersions start counting milliseconds: they follow
// the clock, so a simulation started again later continues above what an earlier run published,
// as a real member's do, and look like a long-lived etcd's (eleven digits).
var rvEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func clockRV(now time.Time) int64 { return now.Sub(rvEpoch).Milliseconds() }
