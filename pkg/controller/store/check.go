package store

import "hash/maphash"

// checkShared turns on Memory's check that no stored map is modified
// (race-detector builds; see the package documentation, Testing). Tests
// of this package set it to exercise the check in every build.
var checkShared = raceEnabled

// checksumSeed keys checksum; one per process.
var checksumSeed = maphash.MakeSeed()

// checksum sums the entries of o's maps, each tagged with the map it is in,
// independently of iteration order. It allocates nothing.
func checksum(o Object) uint64 {
	return checksumMap(o.Labels, 'l') + checksumMap(o.Annotations, 'a') + checksumMap(o.Data, 'd')
}

func checksumMap(m map[string]string, tag byte) uint64 {
	var h maphash.Hash
	h.SetSeed(checksumSeed)
	sum := uint64(len(m)) * 0x9e3779b97f4a7c15
	for k, v := range m {
		h.Reset()
		_ = h.WriteByte(tag)
		_, _ = h.WriteString(k)
		_ = h.WriteByte(0)
		_, _ = h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}
