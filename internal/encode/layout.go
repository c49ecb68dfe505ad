package encode

import "fmt"

// Layout places the data and parity of one L3 group of K members on those
// members. It is pure arithmetic, shared by the encoder, the rebuild and
// the offline tools, so that they always agree on where every byte is.
//
// There are two schemes (docs/format/parity.md):
//
//   - Full (M == K, FTI's L3): one codeword of K data and K parity shards
//     per byte position. Member i's whole data file is data shard i.
//     Member i holds parity shard i, as long as the largest data file
//     (Padded bytes). Any K of the 2K files may be lost, so up to half
//     the members. The parity overhead is 1.
//   - Rotated (1 <= M < K, SCR/redset style): K stripes, each a codeword
//     of D = K-M data shards and M parity shards, one shard per member, so
//     that every member holds exactly one shard of every stripe. The parity
//     shards of stripe t are held by members t, t+1, ..., t+M-1 (mod K).
//     That rotates the parity over the group. A member's data is cut into
//     D segments, one for each stripe it does not hold parity of. Any M
//     lost members (data, parity or both) are rebuilt; the parity overhead
//     is M/D = M/(K-M), the least any code surviving M lost members can
//     have.
//
// Both schemes are processed in rows, so that every file is read and
// written front to back (and hashed on the way). Row r of a member's data
// file is Segments() consecutive units; unit s of the row belongs to data
// segment s. Row r of a member's parity payload is Chunks() consecutive
// units; unit c of the row belongs to the member's parity chunk c. In the
// full scheme a row is one unit of Unit bytes (the last row may be shorter)
// and the parity payload is Padded bytes. In the rotated scheme every unit
// is Unit bytes (beyond the data there are zeros, in memory only) and the
// parity payload is Rows()*M*Unit bytes.
type Layout struct {
	K, M   int
	Padded int64
	// Unit is the stripe unit in bytes. It shapes the rotated scheme's
	// files (it is recorded in their headers); the full scheme accepts any
	// unit, it only sets the processing block.
	Unit int
}

// NewLayout returns the layout of a group of k members with m parity
// shards (m == k: full; 1 <= m < k: rotated), the largest data file padded
// bytes long and the stripe unit unit.
func NewLayout(k, m int, padded int64, unit int) (Layout, error) {
	if k < 1 || m < 1 || m > k || k+m > MaxShards || padded < 0 || unit < 1 {
		return Layout{}, fmt.Errorf("%w: layout k=%d m=%d padded=%d unit=%d; need 1<=m<=k, k+m<=%d, unit>=1",
			ErrBadShape, k, m, padded, unit, MaxShards)
	}
	return Layout{K: k, M: m, Padded: padded, Unit: unit}, nil
}

// Rotated reports whether the layout is the rotated scheme (M < K).
func (l Layout) Rotated() bool { return l.M < l.K }

// DataShards is the number of data shards of a codeword: K (full) or
// K-M (rotated).
func (l Layout) DataShards() int {
	if l.Rotated() {
		return l.K - l.M
	}
	return l.K
}

// Stripes is the number of codewords side by side: 1 (full) or K.
func (l Layout) Stripes() int {
	if l.Rotated() {
		return l.K
	}
	return 1
}

// Segments is the number of units in a row of a member's data file.
func (l Layout) Segments() int {
	if l.Rotated() {
		return l.K - l.M
	}
	return 1
}

// Chunks is the number of units in a row of a member's parity payload.
func (l Layout) Chunks() int {
	if l.Rotated() {
		return l.M
	}
	return 1
}

// Rows is the number of rows.
func (l Layout) Rows() int64 {
	span := int64(l.Segments()) * int64(l.Unit)
	return (l.Padded + span - 1) / span
}

// UnitLen is the length of the units of row r.
func (l Layout) UnitLen(r int64) int {
	if l.Rotated() {
		return l.Unit
	}
	return int(min(int64(l.Unit), l.Padded-r*int64(l.Unit)))
}

// DataOffset is the offset of row r in a data file.
func (l Layout) DataOffset(r int64) int64 { return r * int64(l.Segments()) * int64(l.Unit) }

// ParityOffset is the offset of row r in a parity payload.
func (l Layout) ParityOffset(r int64) int64 { return r * int64(l.Chunks()) * int64(l.Unit) }

// ParitySize is the length of every member's parity payload.
func (l Layout) ParitySize() int64 {
	if l.Rotated() {
		return l.Rows() * int64(l.M) * int64(l.Unit)
	}
	return l.Padded
}

func mod(a, k int) int { return ((a % k) + k) % k }

// Segment returns the stripe and codeword position (0..DataShards()-1) of
// member's data segment s.
func (l Layout) Segment(member, s int) (stripe, pos int) {
	if l.Rotated() {
		return mod(member-l.M-s, l.K), s
	}
	return 0, member
}

// Chunk returns the stripe and parity shard (0..M-1) of member's parity
// chunk c.
func (l Layout) Chunk(member, c int) (stripe, j int) {
	if l.Rotated() {
		return mod(member-c, l.K), c
	}
	return 0, member
}

// Shard says who holds codeword position p (0..DataShards()-1 data, then
// M parity) of a stripe: the member, whether it is in the member's parity
// file, and the unit index within the member's row (segment or chunk).
type Shard struct {
	Member int
	Parity bool
	Unit   int
}

// Holder returns the holder of position p of stripe t.
func (l Layout) Holder(t, p int) Shard {
	d := l.DataShards()
	if p < d {
		if l.Rotated() {
			return Shard{Member: mod(t+l.M+p, l.K), Unit: p}
		}
		return Shard{Member: p}
	}
	j := p - d
	if l.Rotated() {
		return Shard{Member: mod(t+j, l.K), Parity: true, Unit: j}
	}
	return Shard{Member: j, Parity: true}
}

// Code returns the Reed-Solomon code of one codeword.
func (l Layout) Code(o Options) (*Code, error) { return NewWith(l.DataShards(), l.M, o) }

// Damage describes which files of a group are lost, by member.
type Damage struct {
	Data, Parity []bool
}

// Lost returns the erasure mask (DataShards()+M positions) of stripe t.
func (l Layout) Lost(d Damage, t int) []bool {
	n := l.DataShards() + l.M
	lost := make([]bool, n)
	for p := range n {
		h := l.Holder(t, p)
		if h.Parity {
			lost[p] = d.Parity[h.Member]
		} else {
			lost[p] = d.Data[h.Member]
		}
	}
	return lost
}

// Check returns nil when every stripe has at most M lost shards, and
// otherwise the first stripe that has more with an *ErasureError (its Lost
// lists the stripe's lost positions, data first).
func (l Layout) Check(d Damage) (stripe int, err error) {
	if len(d.Data) != l.K || len(d.Parity) != l.K {
		return 0, fmt.Errorf("%w: damage of %d/%d members, group has %d", ErrBadShape, len(d.Data), len(d.Parity), l.K)
	}
	for t := range l.Stripes() {
		var gone []int
		for p, x := range l.Lost(d, t) {
			if x {
				gone = append(gone, p)
			}
		}
		if len(gone) > l.M {
			return t, &ErasureError{K: l.DataShards(), M: l.M, Lost: gone}
		}
	}
	return 0, nil
}

// EncodeFiles computes every member's parity payload from the members'
// whole data files in memory (data[i] is member i's file, at most Padded
// bytes). It is the reference the distributed encoder must match, and
// suits tools and tests; checkpoints use the streaming encoder in package
// partner.
func (l Layout) EncodeFiles(data [][]byte) ([][]byte, error) {
	if len(data) != l.K {
		return nil, fmt.Errorf("%w: %d data files for %d members", ErrBadShape, len(data), l.K)
	}
	code, err := l.Code(Options{})
	if err != nil {
		return nil, err
	}
	parity := make([][]byte, l.K)
	for i := range parity {
		parity[i] = make([]byte, l.ParitySize())
	}
	d := l.DataShards()
	for r := range l.Rows() {
		n := l.UnitLen(r)
		for t := range l.Stripes() {
			shards := make([][]byte, d+l.M)
			for p := range shards {
				h := l.Holder(t, p)
				if h.Parity {
					off := l.ParityOffset(r) + int64(h.Unit*n)
					shards[p] = parity[h.Member][off : off+int64(n)]
					continue
				}
				shards[p] = make([]byte, n)
				if off := l.DataOffset(r) + int64(h.Unit*n); off < int64(len(data[h.Member])) {
					copy(shards[p], data[h.Member][off:])
				}
			}
			if err := code.EncodeBlock(shards[:d], shards[d:]); err != nil {
				return nil, err
			}
		}
	}
	return parity, nil
}
