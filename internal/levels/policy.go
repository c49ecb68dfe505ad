package levels

// Policy decides which committed checkpoints a newly committed one makes
// superfluous. The engine deletes them after the new manifest is durable.
type Policy interface {
	// Drop returns the checkpoints of committed (oldest first, latest
	// included as the last element) to delete now that latest committed.
	Drop(committed []*Manifest, latest *Manifest) []*Manifest
}

// FTIPolicy is FTI's retention rule: a checkpoint at level L supersedes
// every older checkpoint at a level ≤ L, so whatever lower-level checkpoint
// still exists is newer than every higher-level one.
type FTIPolicy struct {
	// KeepL4 keeps every L4 checkpoint (FTI's keep_l4_ckpt).
	KeepL4 bool
	// KeepLast, when > 1, also keeps the newest KeepLast checkpoints
	// whatever their level, so a restart can fall back further.
	KeepLast int
}

// Drop implements [Policy].
func (p FTIPolicy) Drop(committed []*Manifest, latest *Manifest) []*Manifest {
	var out []*Manifest
	for i, m := range committed {
		if m.Seq >= latest.Seq || m.Level > latest.Level {
			continue
		}
		if p.KeepL4 && m.Level == L4 {
			continue
		}
		if p.KeepLast > 1 && len(committed)-i <= p.KeepLast {
			continue
		}
		out = append(out, m)
	}
	return out
}
