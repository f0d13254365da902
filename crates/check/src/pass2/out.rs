//! What checking one directory block produces: findings, the order-dependent events the
//! merge decides, and the references counted; stored back to back per chunk (`Outs`).

use crate::htree;
use crate::report::Findings;

/// An order-dependent fact the merge must account for. (Plain references are counted
/// directly in a shared atomic table: their order does not matter.)
#[derive(Clone, Copy)]
pub(super) enum Event {
    /// `..` of directory `dir` names `target`.
    DotDot { dir: u32, target: u32 },
    /// Directory `dir` has an entry for the directory `child`.
    Subdir { dir: u32, child: u32, name: NameRef },
    /// An entry names an inode pass 1 flagged: check its fields (once). The entry is at
    /// offset `off` of block `lblk` (physical `pblk`) of `dir`; `clears` says the inode will
    /// be cleared, and the entry with it (nothing else of it was checked or counted).
    BadInode {
        dir: u32,
        ino: u32,
        name: NameRef,
        at: EntryAt,
        clears: bool,
        /// Pass 1 made it a directory (`P1_TREAT_AS_DIRECTORY` agreed to).
        as_dir: bool,
    },
}

/// Where a directory entry is: physical block, logical block, offset in the block.
#[derive(Clone, Copy)]
pub(super) struct EntryAt {
    pub(super) pblk: u64,
    pub(super) lblk: u32,
    pub(super) off: u32,
}

/// An entry name kept in its block output's name buffer, so an event costs no allocation of
/// its own (the dirs profile has one subdirectory event per directory).
#[derive(Clone, Copy)]
pub(super) struct NameRef {
    pub(super) start: u32,
    pub(super) len: u8,
}

impl NameRef {
    pub(super) fn get(self, names: &[u8]) -> &[u8] {
        let start = self.start as usize;
        names
            .get(start..start + usize::from(self.len))
            .unwrap_or_default()
    }
}

#[derive(Default)]
pub(super) struct BlockOut {
    /// The directory the block belongs to (0 for none).
    pub(super) dir: u32,
    pub(super) findings: Findings,
    pub(super) events: Vec<Event>,
    /// The names events refer to, back to back.
    pub(super) names: Vec<u8>,
    /// Facts about a block of an indexed directory, checked per directory in the merge.
    /// (Boxed: most blocks are not in an indexed directory, and a window holds many blocks.)
    pub(super) dx: Option<Box<htree::DxBlock>>,
    /// Lowest and highest name hash of the entries (indexed directories only).
    pub(super) hash_range: Option<(u32, u32)>,
    /// A name could not be hashed as the kernel would (casefolded non-ASCII, SipHash).
    pub(super) hash_unknown: bool,
    /// Entry references (`ino - 1`) not yet added to the shared counter: added in batches
    /// (`Ctx::add_refs`), as one lock per entry was a twentieth of pass 2.
    pub(super) refs: Vec<u32>,
}

impl Event {
    /// The event with its name moved `base` bytes further into a name buffer.
    pub(super) fn rebased(self, base: u32) -> Event {
        let at = |n: NameRef| NameRef {
            start: n.start.saturating_add(base),
            len: n.len,
        };
        match self {
            Event::DotDot { .. } => self,
            Event::Subdir { dir, child, name } => Event::Subdir {
                dir,
                child,
                name: at(name),
            },
            Event::BadInode {
                dir,
                ino,
                name,
                at: entry,
                clears,
                as_dir,
            } => Event::BadInode {
                dir,
                ino,
                name: at(name),
                at: entry,
                clears,
                as_dir,
            },
        }
    }
}

/// The outputs of consecutive blocks stored back to back: one set of vectors per chunk of a
/// window, so that checking a block allocates nothing of its own (and the merge, on another
/// thread, frees a few vectors per chunk instead of several per block).
#[derive(Default)]
pub(super) struct Outs {
    pub(super) heads: Vec<Head>,
    pub(super) findings: Vec<crate::report::Finding>,
    pub(super) events: Vec<Event>,
    pub(super) names: Vec<u8>,
}

/// One block's share of an [`Outs`]: how many of the findings and events that follow the
/// previous block's are its own, and its index facts.
pub(super) struct Head {
    pub(super) dir: u32,
    pub(super) findings: u32,
    pub(super) events: u32,
    pub(super) dx: Option<Box<htree::DxBlock>>,
}

impl Outs {
    /// Move one block's output in, leaving `bo` empty (its vectors keep their capacity) for
    /// the next block.
    pub(super) fn push(&mut self, bo: &mut BlockOut) {
        let base = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.extend_from_slice(&bo.names);
        bo.names.clear();
        let events = bo.events.len() as u32;
        self.events
            .extend(bo.events.drain(..).map(|ev| ev.rebased(base)));
        let findings = bo.findings.0.len() as u32;
        self.findings.append(&mut bo.findings.0);
        self.heads.push(Head {
            dir: bo.dir,
            findings,
            events,
            dx: bo.dx.take(),
        });
        bo.dir = 0;
        bo.hash_range = None;
        bo.hash_unknown = false;
    }
}

impl BlockOut {
    /// Copy an entry name into the name buffer for an event.
    pub(super) fn keep_name(&mut self, name: &[u8]) -> NameRef {
        // Names are at most 255 bytes (`name_len` is one byte); clamp anyway.
        let name = &name[..name.len().min(usize::from(u8::MAX))];
        let start = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.extend_from_slice(name);
        NameRef {
            start,
            len: name.len() as u8,
        }
    }
}

impl BlockOut {
    /// Count one directory-entry reference to `ino` (saturating, like e2fsck's icount), in
    /// the next `Ctx::add_refs`.
    pub(super) fn count_ref(&mut self, ino: u32) {
        if ino != 0 {
            self.refs.push(ino - 1);
        }
    }
}
