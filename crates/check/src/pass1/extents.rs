//! Pass 1's rules for extent leaf entries: order, bounds, length, directory limits, unwritten
//! directory blocks and gaps, then the count, claim and directory-block list of the extent.

use super::blockmap::{dir_block_limit, Mapper};
use crate::ext4::blocks::{self, Mapping, Span, Step};
use crate::facts::DirBlock;
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::Incompat;

impl Mapper<'_, '_, '_> {
    /// [`blocks::past_eof_allowed`] for this inode.
    fn past_eof_allowed(&self, end: u64, unwritten: bool) -> bool {
        let inode = self.ic.inode;
        let eof = inode.size().div_ceil(self.scan.fs.block_size() as u64);
        let verity = inode.flags() & ffsck_format::inode::flags::VERITY != 0;
        blocks::past_eof_allowed(end, eof, unwritten, verity)
    }

    /// One extent leaf entry whose start is in range. `span` is its node's.
    pub(super) fn map_extent(&mut self, m: Mapping, span: &mut Span) -> Step {
        let geo = &self.scan.fs.geo;
        let ino = self.ic.ino;
        let is_dir = self.is_dir;
        let Mapping {
            mut lblk,
            pblk,
            len,
            uninit: unwritten,
        } = m;
        let ctx = ProblemCtx {
            ino,
            blk: pblk,
            num: lblk,
            num2: len,
            ..Default::default()
        };
        let problem = if lblk < span.next_start {
            Some(P::P1_OUT_OF_ORDER_EXTENTS)
        } else if lblk + len > span.hi
            && span.level > 0
            && !self.past_eof_allowed(lblk + len, unwritten)
        {
            Some(P::P1_EXTENT_END_OUT_OF_BOUNDS)
        } else if len == 0 {
            Some(P::P1_EXTENT_LENGTH_ZERO)
        } else if pblk + len > geo.blocks_count {
            Some(P::P1_EXTENT_ENDS_BEYOND)
        } else if is_dir
            && !geo.incompat.has(Incompat::LARGEDIR)
            && lblk + len > dir_block_limit(geo)
        {
            Some(P::P1_TOOBIG_DIR)
        } else if lblk < self.w.next_lblock {
            Some(P::P1_EXTENT_COLLISION)
        } else {
            None
        };
        // An extent that runs over the entries after it (a length grown by damage, or a
        // start moved down): when out-of-order extents are dropped, it is dropped alone, and
        // the entries it ran over, in order after it is gone, keep their blocks. (e2fsck drops
        // them and then it, but for the node's last entry its walk never reaches: more of the
        // file is lost that way, and none of it is wrong.)
        let problem = match problem {
            None if span.covers_next && self.scan.policy.answer(P::P1_OUT_OF_ORDER_EXTENTS) => {
                Some(P::P1_OUT_OF_ORDER_EXTENTS)
            }
            p => p,
        };
        if problem.is_none() {
            self.w.next_lblock = self.w.next_lblock.max(lblk + len);
        }
        if problem.is_none() && is_dir && unwritten {
            // A directory block is never unwritten: its contents would read as zeroes.
            self.flag(P::P1_UNINIT_DBLOCK, ctx.clone());
        }
        if let Some(p) = problem {
            // e2fsck names a too-big extent by the block just past its end.
            let ctx = if p == P::P1_TOOBIG_DIR {
                ProblemCtx {
                    num: lblk + len,
                    ..ctx
                }
            } else {
                ctx
            };
            // Fixed, the extent is gone. Unfixed, e2fsck passes over it all the same: none of
            // its blocks is counted, claimed or listed as a directory block. Only in a subtree
            // it walks without repairs (critical metadata) are a bad entry's blocks taken.
            let quiet = self.w.quiet;
            let dropped = self.flag(p, ctx);
            if dropped || !quiet || p == P::P1_EXTENT_LENGTH_ZERO {
                return Step::Go;
            }
        }
        // A gap before this extent: e2fsck offers to move the extent down to close it.
        let next_lblk = self.w.last_block.map_or(0, |l| l + 1);
        let ratio = u64::from(geo.cluster_ratio);
        let new_lblk = if ratio > 1 {
            (next_lblk.div_ceil(ratio) * ratio) | (pblk % ratio)
        } else {
            next_lblk
        };
        // (With bigalloc the extent may already be as low as its cluster allows.)
        if is_dir && next_lblk < lblk && new_lblk != lblk {
            let ctx = ProblemCtx {
                ino,
                blk: lblk,
                blk2: new_lblk,
                ..Default::default()
            };
            // Agreed to: the rest of the check sees the extent where the repair puts it.
            if self.flag(P::P1_COLLAPSE_DBLOCK, ctx) {
                lblk = new_lblk;
            }
        }
        let usable = len.min(geo.blocks_count.saturating_sub(pblk));
        if ratio > 1 && misaligned(self.w.prev_pblk, self.w.last_block, pblk, lblk, ratio) {
            // Each of its blocks is claimed twice, as e2fsck does, so pass 1B names them and
            // pass 1D's clone puts them where their logical offset in the cluster says.
            for j in 0..usable {
                let ctx = ProblemCtx {
                    ino,
                    blk: pblk + j,
                    num: lblk + j,
                    ..Default::default()
                };
                self.flag(P::P1_MISALIGNED_CLUSTER, ctx);
                self.scan.claim(self.out, pblk + j, 1);
                self.scan.claim(self.out, pblk + j, 1);
            }
        }
        let w = &mut *self.w;
        w.count(pblk, usable, ratio);
        if w.num_blocks > geo.blocks_count {
            w.exhausted = true;
            return Step::Stop;
        }
        self.scan.claim(self.out, pblk, usable);
        let broke = w.prev_pblk.filter(|&p| p + 1 != pblk);
        if broke.is_some() {
            w.fragmented = true;
        }
        if usable > 0 {
            w.prev_pblk = Some(pblk + usable - 1);
            let last = lblk + usable - 1;
            w.last_block = Some(w.last_block.map_or(last, |l| l.max(last)));
            if !unwritten {
                w.last_init_block = Some(w.last_init_block.map_or(last, |l| l.max(last)));
            }
            if is_dir {
                for j in 0..usable {
                    w.dir_blocks.push(DirBlock {
                        pblk: pblk + j,
                        ino,
                        lblk: (lblk + j).min(u64::from(u32::MAX)) as u32,
                    });
                }
            }
        }
        if let Some(prev) = broke {
            self.fragcheck(prev, pblk, lblk as i64, Some(len));
        }
        span.next_start = lblk + len;
        Step::Go
    }
}

/// Whether an extent starting at logical block `lblk`, physical `pblk`, breaks bigalloc's
/// rule (clusters of `ratio` blocks): a block's offset in its logical cluster must be its
/// offset in its physical cluster, and one logical cluster may not span two physical ones.
/// `prev_pblk` and `last_lblk` are where the previous extent ended.
fn misaligned(
    prev_pblk: Option<u64>,
    last_lblk: Option<u64>,
    pblk: u64,
    lblk: u64,
    ratio: u64,
) -> bool {
    if lblk % ratio != pblk % ratio {
        return true;
    }
    match (prev_pblk, last_lblk) {
        (Some(pp), Some(ll)) => {
            !lblk.is_multiple_of(ratio) && lblk / ratio == ll / ratio && pblk / ratio != pp / ratio
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::misaligned;

    #[test]
    fn misaligned_follows_both_bigalloc_rules() {
        // Offsets 3 and 3 in 16-block clusters: fine, alone or after a neighbour.
        assert!(!misaligned(None, None, 1955, 259, 16));
        assert!(!misaligned(Some(1954), Some(258), 1955, 259, 16));
        // Offset 8 logical, 4 physical.
        assert!(misaligned(None, None, 1956, 264, 16));
        // Same offset (9), but logical cluster 16 continues in physical cluster 200 after
        // the previous extent ended in physical cluster 122.
        assert!(misaligned(Some(1957), Some(264), 3209, 265, 16));
        // A new logical cluster may start anywhere aligned.
        assert!(!misaligned(Some(1957), Some(264), 3200, 272, 16));
        // Without clusters nothing is misaligned.
        assert!(!misaligned(Some(7), Some(9), 100, 3, 1));
    }
}
