//! The problem catalogue: one declarative row per inconsistency ffsck can find.
//!
//! Each row gives a stable name (never reused), the e2fsck problem code it corresponds to (for
//! differential tests against e2fsck's problem log; `-` for problems e2fsck has no code for),
//! the prompt a repair would ask, flags that drive the policy's answer, the fixer of `repair`
//! that makes its fix (`-`: none, so the policy answers no), the order the fix keeps within a
//! repair round (`after`), optionally the latch group it belongs to (`Latch`, written before the
//! message; most rows belong to none), and a message template over the typed `ProblemCtx`. The pass is the
//! name's prefix (`P1B_` and the like count as pass 1). Placeholders: {ino} {ino2} {dir} {blk}
//! {blk2} {group} {num} {num2} {name} {str}, {num:o} ({num} in octal), {dirpath} ({dir} as
//! "/path (ino)"), {dirname} ({dir} as "/path"; both fall back to the number when the path was
//! not looked up), {block}/{Block} (`num` as e2fsck names a block of a file's map), {path}
//! (the path of the inode itself, pass 1C's), {strpath} (the entry `str` of directory `dir` as a
//! path, "/a/b/name", as e2fsck's `%Q` names an inode by the entry it was found at), {inopath}
//! (`ino`, a directory, as "/path (ino)"), {blk:time} (`blk` as a time stamp) and
//! {num:x}/{num2:x} (as "0x" and four or more hex digits).

use serde::Serialize;

/// What a repair does when the answer is yes (shown as the question).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Prompt {
    None,
    /// A question with no word of its own: the message itself is asked ("Recreate journal?").
    Null,
    Fix,
    Clear,
    Relocate,
    Allocate,
    Expand,
    Connect,
    Create,
    Salvage,
    Truncate,
    ClearInode,
    Abort,
    Split,
    Continue,
    CloneDup,
    Delete,
    Suppress,
    Unlink,
    ClearHtree,
    Recreate,
    Optimize,
    ClearFlag,
}

impl Prompt {
    pub fn text(self) -> &'static str {
        match self {
            Prompt::None | Prompt::Null => "",
            Prompt::Fix => "Fix",
            Prompt::Clear => "Clear",
            Prompt::Relocate => "Relocate",
            Prompt::Allocate => "Allocate",
            Prompt::Expand => "Expand",
            Prompt::Connect => "Connect to /lost+found",
            Prompt::Create => "Create",
            Prompt::Salvage => "Salvage",
            Prompt::Truncate => "Truncate",
            Prompt::ClearInode => "Clear inode",
            Prompt::Abort => "Abort",
            Prompt::Split => "Split",
            Prompt::Continue => "Continue",
            Prompt::CloneDup => "Clone multiply-claimed blocks",
            Prompt::Delete => "Delete file",
            Prompt::Suppress => "Suppress messages",
            Prompt::Unlink => "Unlink",
            Prompt::ClearHtree => "Clear HTree index",
            Prompt::Recreate => "Recreate",
            Prompt::Optimize => "Optimize",
            Prompt::ClearFlag => "Clear flag",
        }
    }
}

/// Decision flags (a small bit set).
pub mod flag {
    /// Safe to fix without asking in preen mode.
    pub const PREEN_OK: u16 = 1;
    /// Answering "no" leaves no inconsistency behind (optimisations, summary counts).
    pub const NO_OK: u16 = 2;
    /// The check cannot continue after this problem.
    pub const FATAL: u16 = 4;
    /// Informational: printed, never asked, not counted as an error.
    pub const INFO: u16 = 8;
    /// Not printed in preen mode.
    pub const PREEN_NOMSG: u16 = 16;
    /// Not a fix of an inconsistency (optimisations): never makes the exit code non-zero.
    pub const NOT_A_FIX: u16 = 32;
    /// Not printed when the answer is no (the question is implied by a later fix).
    pub const NO_NOMSG: u16 = 64;
    /// A superblock finding of pass 0: left unfixed (or, for a note, left standing under -n)
    /// it sets the uncorrected exit bit, although other pass-0 answers do not.
    pub const SB_ERROR: u16 = 128;
    /// Never reported: the row is kept so the catalogue follows e2fsck's table (its code and
    /// message are e2fsck's; a check that finds it may come).
    pub const KEPT: u16 = 256;
    /// e2fsck makes the fix without marking the file system changed (a group descriptor's
    /// fields, a new UUID, an extent block's checksum): when such fixes are all a run makes, e2fsck prints no "FILE SYSTEM
    /// WAS MODIFIED" and they do not make the exit code 1 by themselves.
    pub const QUIET: u16 = 512;
    /// Never printed: a step e2fsck takes without a message of its own (its pass header says
    /// it), such as a block map rewritten as an extent tree under `-E bmap2extent`. Reports
    /// and the problem log still list it.
    pub const NOMSG: u16 = 1024;
    /// Not printed when the answer is yes: e2fsck makes the fix without a message (the
    /// journal's recorded error cleared), yet a read-only check reports it.
    pub const YES_NOMSG: u16 = 2048;
    /// Answered no in preen mode, without asking (with `NO_OK`, e2fsck's choice for flags on
    /// special files and trees that could be shallower: harmless left, not for a boot to fix).
    pub const PREEN_NO: u16 = 4096;
    /// Kept as runs: a row of this finding whose `num` counts up is one finding with a run
    /// length (`ProblemCtx::run`; a directory's holes, which a garbage map can number in
    /// millions). Shown, logged, asked and fixed one by one (`Finding::each`).
    pub const RUNS: u16 = 8192;
    /// Reported where e2fsck reports nothing, on purpose: damage libext2fs walks past and the
    /// kernel refuses (the row says why). `ffsck-lab fuzz` counts a read-only check that
    /// differs from e2fsck's only by such findings apart from false alarms.
    pub const BEYOND_E2FSCK: u16 = 16384;
}

/// Which fixer of `repair` makes a problem's fix: its fix class. The repair's fixer table
/// (`repair::FIXERS`) says how each one applies and in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub(crate) enum Fixer {
    /// The check makes the fix itself when the answer is yes (journal superblock, replay).
    Check,
    /// Inode fields (times, sizes, flags, counts).
    Inode,
    /// The inode is cleared.
    Clear,
    /// Reconnection to `/lost+found`.
    Connect,
    /// A directory entry edited or cleared in place.
    Dirent,
    /// The directory is rebuilt.
    Salvage,
    /// A directory hole gets a block.
    DirHole,
    /// A file's block map or extent tree.
    BlockMap,
    /// A too-deep extent tree is rebuilt.
    ExtentTree,
    /// Multiply-claimed blocks are cloned.
    Clone,
    /// Extended attributes.
    Xattr,
    /// Bitmaps, descriptors and counts rebuilt from the final state.
    Alloc,
    /// Quota files.
    Quota,
    /// Superblock feature bits.
    Features,
    /// Superblock fields.
    Superblock,
    /// The resize inode.
    Resize,
    /// The journal inode and superblock flags.
    Journal,
    /// A new journal, made after the last round.
    NewJournal,
    /// The orphan list and orphan file.
    Orphans,
    /// An inode table moved into its group.
    ITable,
    /// A group's unused-inodes count reset.
    Unused,
    /// The root directory.
    Root,
    /// `/lost+found`.
    Lpf,
    /// The MMP block rewritten clean (a new one when its number is bad).
    Mmp,
}

/// The order a fix keeps within a repair round (a small bit set): what it makes others wait
/// for, and what it waits for. A fix held back is made in a later round, on a fresh check.
pub(crate) mod after {
    /// Made alone in its round: every other fix waits (the check restarts after it).
    pub const ALONE: u16 = 1;
    /// Changes block mappings: the fixes of pass 2 on and the allocation rebuild wait.
    pub const REMAPS: u16 = 2;
    /// Clears or rebuilds entries or inodes: the fixes that need reference counts wait.
    pub const RESHAPES: u16 = 4;
    /// Needs pass 2's reference counts: waits for `RESHAPES` fixes.
    pub const COUNTS: u16 = 8;
    /// An inode's fix: waits while the same inode has a problem refused in the same or an
    /// earlier pass.
    pub const INODE: u16 = 16;
    /// Edits an inode's map or fields: waits for the clone of a block its map shares with
    /// critical metadata.
    pub const MAP: u16 = 32;
    /// A summary rebuilt from the final state (bitmaps, counts, quota): waits while anything
    /// stays unfixed, an inode is cleared or a map changes.
    pub const SUMMARY: u16 = 64;
    /// Waits for every fix but the summaries (quota usage).
    pub const LAST: u16 = 128;
}

/// e2fsck's latch groups. The first problem of a group raises the group's question ahead of
/// it, once until the latch is ended; a group with an end message closes its run with that
/// message, whose answer is the group's (`latch::Latches` applies this column). The question
/// gets the context of the problem that raised it, as far as its message uses it.
///
/// Members are answered as their question is (a catalogue test keeps their flags and fixers
/// alike), so the latch's answer is the group's, as in e2fsck, without being carried over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Latch {
    /// A misplaced bitmap or inode table: one warning before the first.
    Reloc,
    /// Group descriptor checksums: one question before the first bad one.
    BgChecksum,
    /// An inode's illegal blocks: one question per inode (the latch is the walk's).
    Block,
    /// Inodes of a corrupted orphan list: one question before the first.
    LowDtime,
    /// An inode's multiply-claimed blocks: a header line, the blocks, an end.
    DupBlocks,
    /// Block bitmap differences: a header, the differences, and the end asking to fix them.
    BlockBitmap,
    /// Inode bitmap differences, the same way.
    InodeBitmap,
    /// Blocks past the largest size an inode's type allows: one question per inode.
    TooBig,
}

impl Latch {
    pub const ALL: &'static [Latch] = &[
        Latch::Reloc,
        Latch::BgChecksum,
        Latch::Block,
        Latch::LowDtime,
        Latch::DupBlocks,
        Latch::BlockBitmap,
        Latch::InodeBitmap,
        Latch::TooBig,
    ];

    /// The question the group's first problem raises.
    pub fn question(self) -> Problem {
        match self {
            Latch::Reloc => Problem::P0_RELOCATE_HINT,
            Latch::BgChecksum => Problem::P0_GDT_CSUM_LATCH,
            Latch::Block => Problem::P1_INODE_BLOCK_LATCH,
            Latch::LowDtime => Problem::P1_ORPHAN_LIST_REFUGEES,
            Latch::DupBlocks => Problem::P1B_DUP_BLOCK_HEADER,
            Latch::BlockBitmap => Problem::P5_BLOCK_BITMAP_HEADER,
            Latch::InodeBitmap => Problem::P5_INODE_BITMAP_HEADER,
            Latch::TooBig => Problem::P1_INODE_TOOBIG,
        }
    }

    /// The message that ends a latched run of the group, if it has one.
    pub fn end(self) -> Option<Problem> {
        match self {
            Latch::DupBlocks => Some(Problem::P1B_DUP_BLOCK_END),
            Latch::BlockBitmap => Some(Problem::P5_BLOCK_BITMAP_END),
            Latch::InodeBitmap => Some(Problem::P5_INODE_BITMAP_END),
            _ => None,
        }
    }

    /// Whether the question's answer is the group's (e2fsck's relocation hint is a warning,
    /// answered by nobody).
    pub fn collates(self) -> bool {
        self != Latch::Reloc
    }

    /// Whether the question is raised again for each inode (the latch lasts one inode's walk)
    /// rather than once for the whole check.
    pub fn per_inode(self) -> bool {
        matches!(self, Latch::Block | Latch::DupBlocks | Latch::TooBig)
    }
}

/// Static description of one problem.
#[derive(Debug)]
pub struct ProblemInfo {
    pub name: &'static str,
    /// e2fsck's code for the problem (None for a problem ffsck reports and e2fsck does not).
    pub e2fsck_code: Option<u32>,
    pub prompt: Prompt,
    pub flags: u16,
    /// The fixer that makes the fix (None: no fix, so no policy answers yes).
    pub(crate) fixer: Option<Fixer>,
    /// Its order within a round (`after` bits).
    pub(crate) after: u16,
    /// The latch group it belongs to, if any.
    pub(crate) latch: Option<Latch>,
    pub message: &'static str,
}

/// A catalogue cell that may be `-` (none).
macro_rules! cell {
    (-) => {
        None
    };
    ($v:expr) => {
        Some($v)
    };
}

macro_rules! catalogue {
    ($($name:ident = $code:tt, $prompt:ident, $flags:expr, $fixer:tt, $after:expr, $($latch:ident,)? $msg:literal;)*) => {
        /// Every problem ffsck reports. Variant names are the stable codes.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        pub enum Problem { $($name),* }
        impl Problem {
            pub const ALL: &'static [Problem] = &[$(Problem::$name),*];
            /// The problem whose stable code (variant name) is `name`.
            pub fn by_name(name: &str) -> Option<Problem> {
                Problem::ALL.iter().copied().find(|p| p.info().name == name)
            }
            pub fn info(self) -> &'static ProblemInfo {
                match self {
                    $(Problem::$name => {
                        static I: ProblemInfo = ProblemInfo {
                            name: stringify!($name),
                            e2fsck_code: cell!($code),
                            prompt: Prompt::$prompt,
                            flags: $flags,
                            fixer: fixer!($fixer),
                            after: $after,
                            latch: latch!($($latch)?),
                            message: $msg,
                        };
                        &I
                    })*
                }
            }
        }
    };
}

/// A latch cell: absent or a `Latch` variant.
macro_rules! latch {
    () => {
        None
    };
    ($l:ident) => {
        Some(Latch::$l)
    };
}

/// A fixer cell: `-` or a `Fixer` variant.
macro_rules! fixer {
    (-) => {
        None
    };
    ($f:ident) => {
        Some(Fixer::$f)
    };
}

use after::*;
use flag::*;

catalogue! {
    // ---- Pass 0: superblock and group descriptors ----
    P0_SB_CORRUPT = 0x000004, None, FATAL, -, 0, "The superblock could not be read or does not describe a valid ext2/ext3/ext4 file system ({str})";
    P0_FS_SIZE_WRONG = 0x000005, Abort, FATAL, -, 0, "The file system size (according to the superblock) is {blk} blocks, but the device holds only {blk2} blocks\n";
    // e2fsck has no code for this: it asks P0_FS_SIZE_WRONG's "Abort?" whatever lies past the
    // end. ffsck sets the size to the device's when pass 1 found no block in use past it (the
    // cut loses nothing), alone in its round; the check restarts on the new size.
    P0_FS_SIZE_FITS = -, Fix, SB_ERROR, Superblock, ALONE, "The file system size (according to the superblock) is {blk} blocks, but the device holds only {blk2} blocks, and no block past the device's end is in use.\n";
    P0_BB_NOT_GROUP = 0x000001, Relocate, 0, Alloc, SUMMARY, Reloc, "Block bitmap for group {group} is not in group.  (block {blk})\n";
    P0_IB_NOT_GROUP = 0x000002, Relocate, 0, Alloc, SUMMARY, Reloc, "Inode bitmap for group {group} is not in group.  (block {blk})\n";
    P0_ITABLE_NOT_GROUP = 0x000003, Relocate, 0, ITable, ALONE, Reloc, "Inode table for group {group} is not in group.  (block {blk})\nWARNING: SEVERE DATA LOSS POSSIBLE.\n";
    P0_RELOCATE_HINT = 0x00000A, None, INFO, -, 0, "Note: if several inode or block bitmap blocks or part\nof the inode table require relocation, you may wish to try\nrunning ffsck with the '-b {num2}' option first.  The problem\nmay lie only with the primary block group descriptors, and\nthe backup block group descriptors may be OK.\n";
    P0_GDT_CSUM = 0x000035, Fix, PREEN_OK | QUIET, Alloc, SUMMARY, BgChecksum, "Group descriptor {group} checksum is {num:x}, should be {num2:x}.";
    P0_GDT_UNINIT = 0x000036, Fix, PREEN_OK | QUIET, Alloc, SUMMARY, "Group descriptor {group} marked uninitialized without feature set.\n";
    // e2fsck has no code for this: it believes the flag, finds no root directory and rebuilds
    // an empty file system. Group 0 always holds the reserved inodes and the root.
    P0_GROUP0_INODE_UNINIT = -, Fix, PREEN_OK, Alloc, SUMMARY, "Group descriptor 0 marks its inodes uninitialized, but it holds the root directory and the reserved inodes.\n";
    P0_GDT_ITABLE_UNUSED = 0x000038, Fix, PREEN_OK | QUIET, Alloc, SUMMARY, "Group descriptor {group} has invalid unused inodes count {num}.";
    P0_BB_UNINIT_LAST = 0x000039, Fix, PREEN_OK | QUIET, Alloc, SUMMARY, "Last group block bitmap uninitialized.";
    // -l, -L, -c: the bad-blocks inode rewritten from a list before the passes.
    P0_BB_LIST_ILLEGAL = -, None, INFO, -, 0, "Bad block {blk} out of range; ignored.";
    P0_BB_LIST_UPDATE = -, None, INFO | NOT_A_FIX, -, 0, "{name}: Updating bad block inode.";
    P0_ADD_UUID = 0x000009, None, PREEN_OK | NOT_A_FIX | QUIET, Superblock, 0, "Filesystem did not have a UUID; generating one.\n";
    P0_BACKUP_JNL = 0x00002D, None, PREEN_OK | NOT_A_FIX, Superblock, 0, "Backing up journal inode block information.\n";
    P0_DIRHASH_HINT = 0x000034, None, PREEN_OK | NOT_A_FIX, Superblock, 0, "Adding dirhash hint to filesystem.\n";
    P0_CHECK_DESC_FAILED = 0x000045, None, INFO, -, 0, "ext2fs_check_desc: {str}";
    P0_FREE_INODE_COUNT = 0x00003F, Fix, PREEN_OK | NO_OK | PREEN_NOMSG | KEPT, Alloc, SUMMARY, "Setting free inodes count to {num} (was {num2})\n";
    P0_FREE_BLOCK_COUNT = 0x000040, Fix, PREEN_OK | NO_OK | PREEN_NOMSG | KEPT, Alloc, SUMMARY, "Setting free blocks count to {num} (was {num2})\n";
    P0_JOURNAL_BAD_INODE = 0x00000F, Clear, PREEN_OK, Journal, 0, "Superblock has an invalid journal (inode {ino}).\n";
    P0_CANT_FIND_JOURNAL = 0x000011, None, 0, -, 0, "Can't find the external journal";
    P0_EXT_JOURNAL_BAD_SUPER = 0x000012, None, 0, -, 0, "The external journal has a bad superblock: {str}";
    P0_JOURNAL_BAD_UUID = 0x000013, None, 0, -, 0, "The external journal does not support this file system (UUID mismatch)";
    P0_JOURNAL_UNSUPP_SUPER = 0x000014, Abort, 0, -, 0, "The journal superblock is of an unknown type ({num}).\n";
    P0_JOURNAL_BAD_SUPER = 0x000015, Fix, 0, Check, 0, "The journal superblock is corrupt.\n";
    P0_JOURNAL_HAS_JOURNAL = 0x000016, Clear, PREEN_OK, Journal, 0, "Superblock has_journal flag is clear, but a journal is present.\n";
    P0_JOURNAL_RECOVER_SET = 0x000017, Clear, PREEN_OK, Journal, 0, "Superblock needs_recovery flag is set, but no journal is present.\n";
    P0_JOURNAL_RECOVERY_CLEAR = 0x000018, None, INFO, -, 0, "Superblock needs_recovery flag is clear, but journal has data.";
    P0_JOURNAL_RESET_JOURNAL = 0x000019, Null, PREEN_NOMSG, -, 0, "Clear journal";
    P0_JOURNAL_UNSUPP_ROCOMPAT = 0x000025, Abort, 0, -, 0, "The journal superblock has an unknown read-only feature flag set.\n";
    P0_JOURNAL_UNSUPP_INCOMPAT = 0x000026, Abort, 0, -, 0, "The journal superblock has an unknown incompatible feature flag set.\n";
    P0_JOURNAL_UNSUPP_VERSION = 0x000027, Abort, 0, -, 0, "The journal version is not supported.\n";
    P0_CLEAR_V2_JOURNAL = 0x00002A, None, 0, Check, 0, "Found invalid V2 journal superblock fields (from V1 journal).\nClearing fields beyond the V1 journal superblock...\n";
    P0_JOURNAL_RUN = 0x00002B, Null, 0, Check, 0, "Run journal anyway";
    P0_JOURNAL_RUN_DEFAULT = 0x00002C, Fix, 0, Check, 0, "Recovery flag not set in the backup superblock, so running the journal anyway.\n";
    P0_ORPHAN_CLEAR_INODE = 0x000020, None, NO_OK, -, 0, "{str} orphaned inode {ino} ({name})";
    // The orphan list's release reports and fixes these itself (the list is dropped from the
    // bad inode on).
    P0_ORPHAN_ILLEGAL_HEAD_INODE = 0x000023, Clear, PREEN_OK, Orphans, 0, "Illegal inode {ino} in the orphaned inode list.\n";
    P0_ORPHAN_ILLEGAL_INODE = 0x000024, Clear, PREEN_OK, Orphans, 0, "Illegal inode {ino} in the orphaned inode list.\n";
    P0_NONZERO_RESERVED_GDT_BLOCKS = 0x00002E, Fix, 0, Superblock, 0, "Filesystem does not have resize_inode enabled, but s_reserved_gdt_blocks\nis {num}; should be zero.";
    P0_CLEAR_RESIZE_INODE = 0x00002F, Clear, PREEN_OK, Resize, 0, "Resize_inode not enabled, but the resize inode is non-zero.";
    P0_RESIZE_INODE_INVALID = 0x000030, Recreate, 0, Resize, 0, "Resize inode not valid.";
    P0_DISABLE_RESIZE_INODE = 0x000051, Fix, 0, Resize, 0, "Resize_inode and meta_bg features are enabled; they are not compatible, so the resize inode should be disabled.";
    P0_FUTURE_SB_LAST_MOUNT = 0x000031, Fix, PREEN_OK | NO_OK, Superblock, 0, "Superblock last mount time ({str},\n\tnow = {name}) is in the future.\n";
    P0_FUTURE_SB_LAST_WRITE = 0x000032, Fix, PREEN_OK | NO_OK, Superblock, 0, "Superblock last write time ({str},\n\tnow = {name}) is in the future.\n";
    P0_GDT_CSUM_LATCH = 0x00003E, Fix, PREEN_OK | QUIET, Alloc, SUMMARY, "One or more block group descriptor checksums are invalid.";
    P0_OPEN_FAILED = 0x000044, None, INFO, -, 0, "The superblock failed the checks for opening the file system ({str}); using the superblock at block {blk}.";
    P0_META_AND_GDT_CSUM_SET = 0x000046, Fix, PREEN_OK | NO_OK, Superblock, 0, "Superblock metadata_csum supersedes uninit_bg; both feature bits cannot be set simultaneously.";
    // Answered no, e2fsck stops (exit 12). Answered yes it zeroes the number and then cannot
    // open the file system (exit 8); ffsck gives the file system a new MMP block instead. A
    // clean block written over a bad one does not mark the file system changed (e2fsck's -y
    // and -p exit 0 when that is all they do).
    P0_MMP_INVALID_BLK = 0x000042, Clear, PREEN_OK, Mmp, 0, "Superblock has invalid MMP block.";
    P0_MMP_INVALID_MAGIC = 0x000043, Fix, PREEN_OK | NO_OK | QUIET, Mmp, 0, "Superblock has invalid MMP magic.";
    P0_MMP_CSUM_INVALID = 0x000047, Fix, PREEN_OK | NO_OK | QUIET, Mmp, 0, "Superblock MMP block checksum does not match.";
    // e2fsck says this through com_err (no problem code) and stops (exit 12).
    P0_MMP_HELD = -, None, INFO | SB_ERROR, -, 0, "The MMP block (block {blk}) says {str}.\nIf you are sure the file system is not in use on any node, run 'tune2fs -f -E clear_mmp' on the device.\n";
    P0_64BIT_WITHOUT_EXTENTS = 0x000048, Fix, PREEN_OK | NO_OK, Superblock, 0, "Superblock 64bit filesystem needs extents to access the whole disk.";
    P0_FIRST_META_BG_TOO_BIG = 0x000049, Clear, 0, Features, 0, "First_meta_bg is too big.  ({num}, max value {num2}).  ";
    P0_CSUM_SEED_WITHOUT_META_CSUM = 0x00004B, Fix, PREEN_OK | NO_OK, Superblock, 0, "Superblock metadata_csum_seed is not necessary without metadata_csum.";
    P0_BAD_MIN_EXTRA_ISIZE = 0x00004D, Fix, 0, Superblock, 0, "Bad required extra isize in superblock ({num}).";
    P0_BAD_WANT_EXTRA_ISIZE = 0x00004E, Fix, 0, Superblock, 0, "Bad desired extra isize in superblock ({num}).";
    P0_INVALID_QUOTA_INO = 0x00004F, Fix, PREEN_OK, Features, 0, "Invalid {str} quota inode {ino}.";
    // e2fsck has no problem code for this: it rejects the superblock and tries the backups.
    P0_SB_CSUM_INVALID = -, Fix, PREEN_OK | SB_ERROR, Superblock, 0, "Superblock checksum does not match the superblock.\n";
    // As e2fsck, a primary failing its checksum is not used; unlike a failed open, that
    // leaves the uncorrected bit under -n.
    P0_SB_CSUM_BACKUP = -, None, INFO | SB_ERROR, -, 0, "The superblock checksum does not match the superblock; using the superblock at block {blk}.";
    // e2fsck's check_super_block stops at these (exit 8); ffsck takes a backup superblock.
    P0_MISC_CORRUPT_SUPER = 0x00000B, None, INFO | SB_ERROR, -, 0, "Corruption found in the superblock ({str} = {num}); using the superblock at block {blk}.";
    P0_FIRST_DATA_BLOCK = 0x000008, None, INFO | SB_ERROR, -, 0, "The superblock's first data block is {num}, should be {num2}; using the superblock at block {blk}.";
    // e2fsck has no code for these: it refuses unknown features (or reports what a flipped
    // known one breaks) and treats a bad journal field as a bad journal.
    P0_SB_INCOMPAT_BACKUP = -, Fix, SB_ERROR, Superblock, 0, "The superblock's incompatible features ({str}) differ from those of every backup superblock ({name}).";
    P0_SB_COMPAT_BACKUP = -, Fix, SB_ERROR, Superblock, 0, "The superblock's compatible features ({str}) differ from those of every backup superblock ({name}).";
    P0_SB_JOURNAL_INUM_BACKUP = -, Fix, SB_ERROR, Superblock, 0, "The superblock names journal inode {ino}, every backup superblock inode {ino2}.";
    P0_SB_JOURNAL_UUID_BACKUP = -, Fix, SB_ERROR, Superblock, 0, "The superblock's journal UUID ({str}) differs from that of every backup superblock ({name}).";
    // e2fsck has no code for this: it looks for the external journal and stops ("Can't find
    // external journal").
    P0_SB_JOURNAL_UUID_INTERNAL = -, Fix, SB_ERROR, Superblock, 0, "The superblock names an external journal ({str}) beside journal inode {ino}, which holds a valid journal: the external journal's UUID is damage.";
    // e2fsck has no code for this: it looks for the journal the UUID names and stops.
    P0_SB_JOURNAL_UUID_NO_JOURNAL = -, Fix, SB_ERROR, Superblock, 0, "The superblock names an external journal ({str}), but the file system has no journal (has_journal is clear): the UUID is damage.";
    // e2fsck has no code for this: it refuses any feature it does not support ("Get a newer
    // version of e2fsck!", exit 8), even one a bit flip set in the primary alone. ffsck asks
    // (never preened) when no backup superblock has the bits; answered no, it refuses as well.
    P0_SB_FEATURES_UNCONFIRMED = -, Clear, SB_ERROR, Superblock, 0, "The superblock's {str} holds features this checker does not support ({name}), which no backup superblock holds: a damaged field, or a newer kernel's feature.";
    P0_SB_REV_LEVEL_BACKUP = -, Fix, SB_ERROR, Superblock, 0, "The superblock's revision level ({num2}) differs from that of every backup superblock ({num}).";
    // e2fsck has no code for this: it clears a journal's recorded error (s_errno) silently,
    // marking the file system as having errors. Under -n its write of the journal superblock
    // fails, which aborts its pass 1 (exit 9) unless the resize-inode check swallows the
    // failure first (`pass0::jsb_write_fails_at_resize`); ffsck reports the error instead.
    P0_JOURNAL_ERRNO = -, Clear, PREEN_OK | NOT_A_FIX | SB_ERROR | YES_NOMSG, Check, 0, "The journal superblock records an error ({str}).\n";
    P0_JOURNAL_RECOVERING = -, None, INFO, -, 0, "Recovering journal: {str}.";
    // e2fsck has no code for this: it prints the line itself whenever it checks read-only.
    // ffsck replays in memory instead, except on a mounted file system (`CheckOptions::mounted`).
    P0_JOURNAL_RECOVERY_SKIPPED = -, None, INFO, -, 0, "Warning: skipping journal recovery because doing a read-only filesystem check.";
    P0_JNL_TXN_CORRUPT = 0x00003A, None, 0, -, 0, "Journal transaction {num} was corrupt, replay was aborted.";
    P0_JOURNAL_CHECKSUM_ERROR = -, None, 0, -, 0, "Journal checksum error found: {str}.";
    P0_JOURNAL_CORRUPTED = -, None, 0, -, 0, "Journal corrupted: {str}.";
    P0_JOURNAL_FC_NOT_REPLAYED = -, None, INFO, -, 0, "The journal holds fast commits for transaction {num}, after the last full commit; they were not replayed, so their changes are missing from this check.";
    P0_INODE_COUNT_WRONG = 0x00000D, Fix, SB_ERROR, Superblock, 0, "Inode count in the superblock is {num}, should be {num2}.\n";
    // e2fsck has no code for this: it stops at a superblock no copy of which opens (its
    // PR_0_SB_CORRUPT, ffsck's P0_SB_CORRUPT, is what ffsck still says without proof). ffsck
    // sets a field that the rest of the superblock gives a value to (superblock::
    // rebuild_fields), or that the file system proves (pass0: a magic number, an inode size, a
    // block count its checksum names).
    P0_SB_FIELD_REBUILT = -, Fix, SB_ERROR, Superblock, 0, "The superblock's {str} is {num}, should be {num2} (no backup superblock could be used).";

    // ---- Pass 1: inodes, blocks and sizes ----
    // Answered yes, pass 1 leaves the inode unused and the root's recreation in the same round
    // overwrites it: no write of its own.
    P1_ROOT_NO_DIR = 0x010001, Clear, 0, Root, 0, "Root inode is not a directory.";
    P1_ROOT_DTIME = 0x010002, Fix, PREEN_OK, Inode, INODE | MAP, "Root inode has dtime set (probably due to old mke2fs).";
    P1_RESERVED_BAD_MODE = 0x010003, Clear, PREEN_OK, Inode, INODE | MAP, "Reserved inode {ino} has invalid mode.";
    P1_ZERO_DTIME = 0x010004, Fix, PREEN_OK, Inode, INODE | MAP, "Deleted inode {ino} has zero dtime.";
    P1_SET_DTIME = 0x010005, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} is in use, but has dtime set.";
    P1_ZERO_LENGTH_DIR = 0x010006, Clear, PREEN_OK, Clear, RESHAPES | INODE, "Inode {ino} is a zero-length directory.";
    P1_BB_CONFLICT = 0x010007, Relocate, 0, Alloc, SUMMARY, "Group {group}'s block bitmap at {blk} conflicts with some other fs block.\n";
    P1_IB_CONFLICT = 0x010008, Relocate, 0, Alloc, SUMMARY, "Group {group}'s inode bitmap at {blk} conflicts with some other fs block.\n";
    P1_ITABLE_CONFLICT = 0x010009, Relocate, 0, ITable, ALONE, "Group {group}'s inode table at {blk} conflicts with some other fs block.\n";
    P1_BAD_I_SIZE = 0x01000C, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino}, i_size is {num}, should be {num2}.";
    P1_BAD_I_BLOCKS = 0x01000D, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino}, i_blocks is {num}, should be {num2}.";
    P1_ILLEGAL_BLOCK_NUM = 0x01000E, Clear, 0, BlockMap, REMAPS | MAP, Block, "Illegal {block} ({blk}) in inode {ino}.";
    P1_BLOCK_OVERLAPS_METADATA = 0x01000F, Clear, 0, -, 0, Block, "{Block} ({blk}) overlaps filesystem metadata in inode {ino}.";
    P1_INODE_BLOCK_LATCH = 0x010010, Clear, 0, BlockMap, REMAPS | MAP, "Inode {ino} has illegal block(s).";
    P1_TOO_MANY_BAD_BLOCKS = 0x010011, ClearInode, 0, BlockMap, REMAPS, "Too many illegal blocks in inode {ino}.\n";
    P1_SUPPRESS_MESSAGES = 0x01002D, Suppress, NO_OK, -, 0, "Further illegal blocks of inode {ino} are not listed.";
    P1_BB_BAD_BLOCK = 0x01000A, Relocate, 0, Alloc, SUMMARY, "Group {group}'s block bitmap ({blk}) is bad.";
    P1_IB_BAD_BLOCK = 0x01000B, Relocate, 0, Alloc, SUMMARY, "Group {group}'s inode bitmap ({blk}) is bad.";
    P1_RELOC_FROM_TO = 0x010020, None, INFO, -, 0, "Relocating group {group}'s {str} from {blk} to {blk2}...";
    P1_RELOC_TO = 0x010021, None, INFO, -, 0, "Relocating group {group}'s {str} to {blk}...";
    P1_SET_IMAGIC = 0x01002F, Clear, PREEN_OK, Inode, INODE | MAP, "Inode {ino} has imagic flag set.";
    P1_SET_IMMUTABLE = 0x010030, Clear, PREEN_OK | PREEN_NO | NO_OK, Inode, INODE | MAP, "Special (device/socket/fifo/symlink) file (inode {ino}) has immutable\nor append-only flag set.";
    P1_SET_NONZSIZE = 0x010032, Fix, PREEN_OK, Inode, INODE | MAP, "Special (device/socket/fifo) inode {ino} has non-zero size.";
    P1_FS_REV_LEVEL = 0x010033, Fix, PREEN_OK | NO_OK, Features, 0, "File system has feature flag(s) set, but is a revision 0 file system.";
    P1_JOURNAL_INODE_NOT_CLEAR = 0x010034, Clear, PREEN_OK, Journal, 0, "Journal inode is not in use, but contains data.";
    P1_JOURNAL_BAD_MODE = 0x010035, Fix, PREEN_OK, Inode, INODE | MAP, "Journal is not regular file.";
    // Not NO_OK (e2fsck's table has no PR_NO_OK here): answered no, the file system is left
    // not valid, exit 4 (recipe s3023-c01769).
    P1_LOW_DTIME = 0x010036, Fix, PREEN_OK, Inode, INODE | MAP, LowDtime, "Inode {ino} was part of the orphaned inode list.";
    P1_ORPHAN_LIST_REFUGEES = 0x010037, Fix, PREEN_OK, Inode, INODE | MAP, "Inodes that were part of a corrupted orphan linked list found.";
    P1_BAD_EA_BLOCK = 0x01003A, Clear, 0, Xattr, 0, "Inode {ino} has a bad extended attribute block {blk}.";
    P1_EXTATTR_REFCOUNT = 0x01003C, Fix, 0, Xattr, 0, "Extended attribute block {blk} has reference count {num}, should be {num2}.";
    P1_READ_EA_BLOCK = 0x010039, Clear, 0, Xattr, 0, "Error reading extended attribute block {blk} for inode {ino}.";
    P1_EA_MULTI_BLOCK = 0x01003E, Clear, 0, Xattr, 0, "Extended attribute block {blk} has h_blocks > 1.";
    P1_EA_ALLOC_COLLISION = 0x010040, Clear, 0, Xattr, 0, "Extended attribute block {blk} is corrupt (allocation collision).";
    P1_EA_BAD_NAME = 0x010041, Clear, 0, Xattr, 0, "Extended attribute block {blk} is corrupt (invalid name).";
    P1_EA_BAD_VALUE = 0x010042, Clear, 0, Xattr, 0, "Extended attribute block {blk} is corrupt (invalid value).";
    // The question of the three below (e2fsck's too-big latch, one per inode).
    P1_INODE_TOOBIG = 0x010043, Truncate, 0, BlockMap, REMAPS | MAP, "Inode {ino} is too big.";
    P1_TOOBIG_DIR = 0x010044, Clear, 0, BlockMap, REMAPS | MAP, TooBig, "{Block} ({blk}) causes directory to be too big.";
    P1_TOOBIG_REG = 0x010045, Clear, 0, -, 0, TooBig, "{Block} ({blk}) causes file to be too big.";
    P1_TOOBIG_SYMLINK = 0x010046, Clear, 0, BlockMap, REMAPS | MAP, TooBig, "{Block} ({blk}) causes symlink to be too big.";
    P1_HTREE_SET = 0x010047, ClearHtree, PREEN_OK, Inode, INODE | MAP, "Inode {ino} has INDEX_FL flag set on filesystem without htree support.\n";
    P1_HTREE_NODIR = 0x010048, ClearHtree, PREEN_OK, Inode, INODE | MAP, "Inode {ino} has INDEX_FL flag set but is not a directory.\n";
    P1_HTREE_BADROOT = 0x010049, ClearHtree, PREEN_OK, Salvage, RESHAPES, "HTREE directory inode {ino} has an invalid root node.\n";
    P1_HTREE_HASHV = 0x01004A, ClearHtree, PREEN_OK, Salvage, RESHAPES, "HTREE directory inode {ino} has an unsupported hash version ({num})\n";
    P1_HTREE_INCOMPAT = 0x01004B, ClearHtree, PREEN_OK, Salvage, RESHAPES, "HTREE directory inode {ino} uses an incompatible htree root node flag.\n";
    P1_HTREE_DEPTH = 0x01004C, ClearHtree, PREEN_OK, Salvage, RESHAPES, "HTREE directory inode {ino} has a tree depth ({num}) which is too big\n";
    P1_EXTRA_ISIZE = 0x01004F, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} has a extra size ({num}) which is invalid\n";
    P1_ATTR_NAME_LEN = 0x010050, Clear, PREEN_OK, Xattr, 0, "Extended attribute in inode {ino} has a namelen ({num}) which is invalid\n";
    P1_ATTR_VALUE_OFFSET = 0x010051, Clear, PREEN_OK, Xattr, 0, "Extended attribute in inode {ino} has a value offset ({num}) which is invalid\n";
    P1_ATTR_VALUE_BLOCK = 0x010052, Clear, PREEN_OK, Xattr, 0, "Extended attribute in inode {ino} has a value block ({num}) which is invalid (must be 0)\n";
    P1_ATTR_VALUE_SIZE = 0x010053, Clear, PREEN_OK, Xattr, 0, "Extended attribute in inode {ino} has a value size ({num}) which is invalid\n";
    P1_ATTR_HASH = 0x010054, Clear, PREEN_OK, Xattr, 0, "Extended attribute in inode {ino} has a hash ({num}) which is invalid\n";
    P1_TREAT_AS_DIRECTORY = 0x010055, Fix, 0, Inode, INODE | MAP, "Inode {ino} is a {str} but it looks like it is really a directory.\n";
    P1_EXTENT_BAD_START_BLK = 0x010058, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino} has an invalid extent\n\t(logical block {num}, invalid physical block {blk}, len {num2})\n";
    P1_EXTENT_ENDS_BEYOND = 0x010059, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino} has an invalid extent\n\t(logical block {num}, physical block {blk}, invalid len {num2})\n";
    // e2fsck clears this inode; the next round clears its entries (as for P1_MISSING_EXTENT_HEADER
    // and pass 2's P2_BAD_MODE..P2_INVALID_SYMLINK).
    P1_EXTENTS_SET = 0x01005A, Clear, PREEN_OK, Clear, RESHAPES | INODE, "Inode {ino} has EXTENTS_FL flag set on filesystem without extents support.\n";
    P1_EXTENT_FEATURE = 0x01005B, Fix, PREEN_OK, Features, ALONE | REMAPS, "Inode {ino} is in extent format, but superblock is missing EXTENTS feature\n";
    P1_UNSET_EXTENT_FL = 0x01005C, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} missing EXTENT_FL, but is in extents format\n";
    P1_FAST_SYMLINK_EXTENT_FL = 0x01005D, Clear, PREEN_OK, Inode, INODE | MAP, "Fast symlink {ino} has EXTENT_FL set.";
    P1_EXTENT_COLLISION = 0x01007D, Clear, 0, BlockMap, REMAPS | MAP, "Inode {ino} has a duplicate extent mapping\n\t(logical block {num}, invalid physical block {blk}, len {num2})\n";
    P1_OUT_OF_ORDER_EXTENTS = 0x01005E, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino} has out of order extents\n\t(invalid logical block {num}, physical block {blk}, len {num2})\n";
    // e2fsck has no code for this: libext2fs walks a child node at the depth its parent
    // implies and never reads the child's own `eh_depth`, so e2fsck passes it as clean. The
    // kernel refuses such a node ("unexpected eh_depth") and the file cannot be read: ffsck
    // walks it as libext2fs does (nothing is lost) and sets the depth the tree implies.
    P1_EXTENT_NODE_DEPTH = -, Fix, PREEN_OK | BEYOND_E2FSCK, BlockMap, REMAPS | MAP, "Inode {ino} extent node (blk {blk}, lblk {num}) claims depth {num2}, but its place in the tree is depth {blk2}.  ";
    P1_EXTENT_HEADER_INVALID = 0x01005F, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino} has an invalid extent node (blk {blk}, lblk {num})\n";
    P1_QUOTA_BAD_MODE = 0x010062, Clear, PREEN_OK, Inode, INODE | MAP, "Quota inode is not a regular file.";
    P1_QUOTA_INODE_NOT_CLEAR = 0x010063, Clear, PREEN_OK, Inode, 0, "Quota inode is not in use, but contains data.";
    P1_INVALID_BAD_INODE = 0x010065, Clear, PREEN_OK, Inode, INODE | MAP, "The bad block inode looks invalid.";
    P1_EXTENT_LENGTH_ZERO = 0x010066, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino} has zero length extent\n\t(invalid logical block {num}, physical block {blk})\n";
    P1_INODE_IS_GARBAGE = 0x010067, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} seems to contain garbage.";
    P1_INODE_ONLY_CSUM_INVALID = 0x010068, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} passes checks, but checksum does not match inode.";
    P1_INODE_EA_ALLOC_COLLISION = 0x010069, Clear, 0, Xattr, 0, "Inode {ino} extended attribute is corrupt (allocation collision).";
    P1_EXTENT_ONLY_CSUM_INVALID = 0x01006A, Fix, PREEN_OK | QUIET, BlockMap, REMAPS | MAP, "Inode {ino} extent block passes checks, but checksum does not match extent\n\t(logical block {num}, physical block {blk2}, len {num2})\n";
    P1_EA_BLOCK_ONLY_CSUM_INVALID = 0x01006C, Fix, PREEN_OK, Xattr, 0, "Inode {ino} extended attribute block {blk} passes checks, but checksum does not match block.  ";
    P1_EXTENT_INDEX_START_INVALID = 0x01006D, Fix, PREEN_OK, BlockMap, REMAPS | MAP, "Interior extent node level {num} of inode {ino}:\nLogical start {blk} does not match logical start {blk2} at next level.";
    P1_EXTENT_END_OUT_OF_BOUNDS = 0x01006E, Clear, PREEN_OK, BlockMap, REMAPS | MAP, "Inode {ino}, end of extent exceeds allowed value (logical block {num}, physical block {blk}, len {num2})\n";
    P1_INLINE_DATA_FEATURE = 0x01006F, Fix, PREEN_OK, Features, 0, "Inode {ino} has inline data, but superblock is missing INLINE_DATA feature\n";
    P1_INLINE_DATA_SET = 0x010070, Clear, PREEN_OK, Clear, RESHAPES | INODE, "Inode {ino} has INLINE_DATA_FL flag on filesystem without inline data support.\n";
    P1_CRITICAL_METADATA_COLLISION = 0x010071, None, INFO, -, 0, "Inode {ino} block {blk} conflicts with critical metadata, skipping block checks.\n";
    P1_COLLAPSE_DBLOCK = 0x010072, Fix, 0, BlockMap, REMAPS | MAP, "Directory inode {ino} block {blk} should be at block {blk2}.";
    P1_UNINIT_DBLOCK = 0x010073, Fix, PREEN_OK, BlockMap, REMAPS | MAP, "Directory inode {ino} has extent marked uninitialized at block {num}.";
    P1_MISALIGNED_CLUSTER = 0x010074, None, INFO, -, 0, "Inode {ino} logical block {num} (physical block {blk}) violates cluster allocation rules.\nWill fix in pass 1B.";
    P1_INLINE_DATA_NO_ATTR = 0x010075, Truncate, 0, Inode, INODE | MAP, "Inode {ino} has INLINE_DATA_FL flag but extended attribute not found.";
    P1_SPECIAL_EXTENTS_IDATA = 0x010076, Clear, PREEN_OK | PREEN_NO | NO_OK, Inode, INODE | MAP, "Special (device/socket/fifo) file (inode {ino}) has extents\nor inline-data flag set.";
    P1_CLEAR_INLINE_DATA_FOR_EXTENT = 0x010077, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} has extent header but inline data flag is set.\n";
    P1_CLEAR_EXTENT_FOR_INLINE_DATA = 0x010078, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} seems to have inline data but extent flag is set.\n";
    P1_CLEAR_EXTENT_INLINE_DATA_FLAGS = 0x010079, Fix, PREEN_OK, Inode, INODE | MAP, "Inode {ino} seems to have block map but inline data and extent flags set.\n";
    P1_CLEAR_EXTENT_INLINE_DATA_INODE = 0x01007A, ClearInode, 0, Clear, RESHAPES | INODE, "Inode {ino} has inline data and extent flags set but i_block contains junk.\n";
    P1_BAD_PRIMARY_SUPERBLOCK = 0x010019, Clear, 0, BlockMap, REMAPS | MAP, "The primary superblock ({blk}) is on the bad block list.\n\nIf the block is really bad, the filesystem can not be fixed.\nYou can remove this block from the bad block list and hope\nthat the block is really OK.  But there are no guarantees.\n\n";
    P1_BAD_PRIMARY_GROUP_DESCRIPTOR = 0x01001A, Clear, 0, BlockMap, REMAPS | MAP, "Block {blk} in the primary group descriptors is on the bad block list\n\nIf the block is really bad, the filesystem can not be fixed.\nYou can remove this block from the bad block list and hope\nthat the block is really OK.  But there are no guarantees.\n\n";
    P1_BADBLOCKS_IN_BADBLOCKS = 0x01007B, ClearInode, 0, Inode, INODE | MAP, "Bad block list says the bad block list inode is bad.";
    P1_EXTENT_BAD_MAX_DEPTH = 0x01007F, Fix, NO_OK | PREEN_OK | PREEN_NO, ExtentTree, MAP, "Inode {ino} extent tree could be more shallow ({num}; could be <= {num2})\n";
    P1_NO_BIGALLOC_BLOCKMAP_FILES = 0x010080, Fix, 0, ExtentTree, MAP, "Inode {ino} on bigalloc filesystem cannot be block mapped.";
    P1_MISSING_EXTENT_HEADER = 0x010081, ClearInode, PREEN_OK, Clear, RESHAPES | INODE, "Inode {ino} has corrupt extent header.";
    P1_ATTR_VALUE_EA_INODE = 0x010083, Clear, PREEN_OK, Xattr, 0, "Inode {ino} has illegal extended attribute value inode {num}.\n";
    P1_CASEFOLD_NONDIR = 0x010088, ClearFlag, 0, Inode, INODE | MAP, "Inode {ino} has the casefold flag set but is not a directory.";
    P1_CASEFOLD_FEATURE = 0x010089, ClearFlag, 0, Inode, INODE | MAP, "Directory {ino} has the casefold flag, but the\ncasefold feature is not enabled.";
    P1_MISSING_ENCRYPTION_XATTR = 0x01008A, ClearFlag, 0, Inode, INODE | MAP, "Inode {ino} has encrypt flag but no encryption extended attribute.\n";
    P1_CORRUPT_ENCRYPTION_XATTR = 0x01008B, ClearInode, 0, Clear, RESHAPES | INODE, "Encrypted inode {ino} has corrupt encryption extended attribute.\n";
    P1_ATTR_NO_EA_INODE_FL = 0x010085, Clear, PREEN_OK, Xattr, 0, "Inode {ino} has illegal extended attribute. EA inode {num} missing EA_INODE flag.\n";
    P1_ATTR_SET_EA_INODE_FL = 0x010086, Fix, PREEN_OK, Xattr, 0, "EA inode {num} for parent inode {ino} missing EA_INODE flag.\n ";
    P1_ORPHAN_FILE_BAD_MODE = 0x01008F, Clear, PREEN_OK, Inode, INODE | MAP, "Orphan file inode {ino} is not regular file.";
    P1_ORPHAN_FILE_NOT_CLEAR = 0x010090, Clear, PREEN_OK, Inode, 0, "Orphan file inode {ino} is not in use, but contains data.";
    P1_EA_INODE_NONREG = 0x010091, ClearFlag, PREEN_OK, -, 0, "Inode {ino} has the ea_inode flag set but is not a regular file.";

    // ---- Pass 1B-1D: multiply-claimed blocks ----
    P1B_DUP_BLOCK_HEADER = 0x011001, None, INFO | PREEN_NOMSG, -, 0, "Multiply-claimed block(s) in inode {ino}:";
    P1B_DUP_BLOCK = 0x011002, None, INFO | PREEN_NOMSG, -, 0, DupBlocks, " {blk}";
    P1B_DUP_RANGE = 0x011008, None, INFO | PREEN_NOMSG, -, 0, DupBlocks, " {blk}--{blk2}";
    P1B_DUP_BLOCK_END = 0x011003, None, INFO | PREEN_NOMSG, -, 0, "";
    P1D_NUM_DUP_INODES = 0x013004, None, INFO, -, 0, "(There are {num} inodes containing multiply-claimed blocks.)\n";
    P1D_DUP_FILE = 0x013001, None, INFO, -, 0, "File {path} (inode #{ino}, mod time {blk:time}) \n  has {num} multiply-claimed block(s), shared with {num2} file(s):";
    P1D_DUP_FILE_LIST = 0x013002, None, INFO, -, 0, "\t{path} (inode #{ino}, mod time {blk:time})";
    P1D_SHARE_METADATA = 0x013003, None, INFO, -, 0, "\t<filesystem metadata>";
    P1D_DUP_BLOCKS_DEALT = 0x013005, None, INFO, -, 0, "Multiply-claimed blocks already reassigned or cloned.\n";
    P1D_CLONE_QUESTION = 0x013006, CloneDup, 0, Clone, REMAPS, "";
    P1D_CLONE_ERROR = 0x013008, None, INFO, -, 0, "Couldn't clone file: no free blocks left for the copies.";
    // A file whose shared blocks could not be cloned is deleted (cleared).
    P1D_DELETE_QUESTION = 0x013007, Delete, 0, Clear, RESHAPES | INODE, "";

    // -E fragcheck: each break in a file's physical contiguity ({str}: d, f or ?).
    P1_FRAGCHECK_BLOCK = -, None, INFO, -, 0, "{ino:6}({str}): expecting {blk:6} got phys {blk2:6} (blkcnt {num:i})";
    P1_FRAGCHECK_EXTENT = -, None, INFO, -, 0, "{ino:6}({str}): expecting {blk:6} actual extent phys {blk2:6} log {num} len {num2}";

    // ---- Pass 1E: extent tree optimisation ----
    // Trees are offered for rebuilding in pass 1 and rebuilt by the extent-tree fixer; the
    // header is said once, at the end of pass 1, when any rebuild was agreed to.
    P1E_PASS_HEADER = 0x014000, None, INFO | PREEN_NOMSG, -, 0, "Pass 1E: Optimizing extent trees";
    P1E_CAN_COLLAPSE_EXTENT_TREE = 0x014006, Optimize, NO_OK | NOT_A_FIX | PREEN_NOMSG, ExtentTree, MAP, "Inode {ino} extent tree (at level {num}) could be shorter.";
    P1E_CAN_NARROW_EXTENT_TREE = 0x014007, Optimize, NO_OK | NOT_A_FIX | PREEN_NOMSG, ExtentTree, MAP, "Inode {ino} extent tree (at level {num}) could be narrower.";
    // -E bmap2extent: every file's map is rewritten as an extent tree, without a question.
    P1E_CONVERT_BMAP = -, Optimize, NO_OK | NOT_A_FIX | PREEN_NOMSG | NOMSG, ExtentTree, MAP, "Inode {ino} mapping rewritten as an extent tree.";

    // ---- Pass 2: directory structure ----
    P2_BAD_INODE_DOT = 0x020001, Fix, 0, Salvage, RESHAPES, "'.' entry in directory {dir} has inode {ino}, should be {dir}.\n";
    P2_BAD_INO = 0x020002, Clear, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} has invalid inode #: {ino}.\n";
    P2_UNUSED_INODE = 0x020003, Clear, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} has deleted/unused inode {ino}.";
    P2_LINK_DOT = 0x020004, Clear, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} is a link to '.'";
    P2_BB_INODE = 0x020005, Clear, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} points to inode ({ino}) located in a bad block.\n";
    P2_LINK_DIR = 0x020006, Clear, 0, Salvage, RESHAPES, "Entry '{name}' in {dirpath} is a link to directory {inopath}.\n";
    P2_LINK_ROOT = 0x020007, Clear, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} is a link to the root inode.\n";
    P2_BAD_NAME = 0x020008, Fix, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} has illegal characters in its name.\n";
    P2_MISSING_DOT = 0x020009, Fix, 0, Salvage, RESHAPES, "Missing '.' in directory inode {dir}.\n";
    P2_MISSING_DOT_DOT = 0x02000A, Fix, 0, Salvage, RESHAPES, "Missing '..' in directory inode {dir}.\n";
    P2_1ST_NOT_DOT = 0x02000B, Fix, 0, Salvage, RESHAPES, "First entry '{name}' (inode={ino}) in directory inode {dir} ({dirname}) should be '.'\n";
    P2_2ND_NOT_DOT_DOT = 0x02000C, Fix, 0, Salvage, RESHAPES, "Second entry '{name}' (inode={ino}) in directory inode {dir} should be '..'\n";
    P2_FADDR_ZERO = 0x02000D, Clear, PREEN_OK, Inode, INODE | MAP, "i_faddr for inode {ino} ({strpath}) is {num}, should be zero.\n";
    P2_FILE_ACL_ZERO = 0x02000E, Clear, PREEN_OK, Inode, INODE | MAP, "i_file_acl for inode {ino} ({strpath}) is {num}, should be zero.\n";
    P2_DIR_SIZE_HIGH_ZERO = 0x02000F, Clear, PREEN_OK, Inode, INODE | MAP, "i_size_high for inode {ino} ({strpath}) is {num}, should be zero.\n";
    P2_BAD_MODE = 0x020012, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} ({strpath}) has invalid mode ({num:o}).\n";
    P2_DIR_CORRUPTED = 0x020013, Salvage, 0, Salvage, RESHAPES, "Directory inode {dir}, block #{num}, offset {num2}: directory corrupted\n";
    P2_FILENAME_LONG = 0x020014, Truncate, KEPT, Salvage, RESHAPES, "Directory inode {dir}, block #{num}, offset {num2}: filename too long\n";
    P2_DIRECTORY_HOLE = 0x020015, Allocate, RUNS, DirHole, RESHAPES, "Directory inode {dir} has an unallocated block #{num}.";
    P2_DOT_NULL_TERM = 0x020016, Fix, 0, Salvage, RESHAPES, "'.' directory entry in directory inode {dir} is not NULL terminated\n";
    P2_DOT_DOT_NULL_TERM = 0x020017, Fix, 0, Salvage, RESHAPES, "'..' directory entry in directory inode {dir} is not NULL terminated\n";
    P2_BAD_CHAR_DEV = 0x020018, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} ({strpath}) is an illegal character device.\n";
    P2_BAD_BLOCK_DEV = 0x020019, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} ({strpath}) is an illegal block device.\n";
    P2_DUP_DOT = 0x02001A, Fix, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} is duplicate '.' entry.\n";
    P2_DUP_DOT_DOT = 0x02001B, Fix, 0, Dirent, RESHAPES, "Entry '{name}' in {dirpath} is duplicate '..' entry.\n";
    P2_FINAL_RECLEN = 0x02001D, Fix, KEPT, Salvage, RESHAPES, "Entry '{name}' in {dirpath} has rec_len of {num}, should be {num2}.\n";
    P2_SPLIT_DOT = 0x020024, Split, 0, Salvage, RESHAPES, "Directory entry for '.' in {dirpath} is big.\n";
    P2_BAD_FIFO = 0x020025, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} ({strpath}) is an illegal FIFO.\n";
    P2_BAD_SOCKET = 0x020026, Clear, 0, Clear, RESHAPES | INODE, "Inode {ino} ({strpath}) is an illegal socket.\n";
    P2_SET_FILETYPE = 0x020027, None, PREEN_OK | NO_OK | NO_NOMSG, Dirent, 0, "Setting filetype for entry '{name}' in {dirpath} to {num2}.";
    P2_BAD_FILETYPE = 0x020028, Fix, 0, Dirent, 0, "Entry '{name}' in {dirpath} has an incorrect filetype (was {num}, should be {num2}).\n";
    P2_CLEAR_FILETYPE = 0x020029, Clear, 0, Dirent, 0, "Entry '{name}' in {dirpath} has filetype set.\n";
    P2_NULL_NAME = 0x020030, Clear, 0, Salvage, RESHAPES, "Entry '{name}' in {dirpath} has a zero-length name.\n";
    P2_INVALID_SYMLINK = 0x020031, Clear, 0, Clear, RESHAPES | INODE, "Symlink {strpath} (inode #{ino}) is invalid.\n";
    // The entry of an inode cleared at its first entry (the rows above) goes with it, as
    // e2fsck zeroes it without a message of its own.
    P2_CLEARED_INODE_ENTRY = -, None, PREEN_OK | NOMSG, Dirent, RESHAPES | INODE, "Entry '{name}' in {dirpath} names inode {ino}, which was cleared: the entry is cleared too.";
    P2_FILE_ACL_BAD = 0x020032, Clear, 0, Inode, INODE | MAP, "Extended attribute block for inode {ino} ({strpath}) is invalid ({blk}).\n";
    P2_FEATURE_LARGE_FILES = 0x020033, Fix, PREEN_OK | NO_OK, Features, 0, "File system contains large files, but lacks LARGE_FILE flag in superblock.\n";
    P2_HTREE_NOTREF = 0x020034, None, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} not referenced";
    P2_HTREE_DUPREF = 0x020035, None, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} referenced twice";
    P2_HTREE_MIN_HASH = 0x020036, None, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has bad min hash";
    P2_HTREE_MAX_HASH = 0x020037, None, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has bad max hash";
    P2_HTREE_CLEAR = 0x020038, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Invalid HTREE directory inode {dir} ({dirname}).  ";
    P2_HTREE_BADBLK = 0x02003A, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir} ({dirname}): bad block number {blk}.\n";
    P2_HTREE_BAD_ROOT = 0x02003C, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: root node is invalid\n";
    P2_HTREE_BAD_LIMIT = 0x02003D, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has invalid limit ({num2})\n";
    P2_HTREE_BAD_COUNT = 0x02003E, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has invalid count ({num2})\n";
    P2_HTREE_HASH_ORDER = 0x02003F, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has an unordered hash table\n";
    P2_HTREE_BAD_DEPTH = 0x020040, None, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: block #{num} has invalid depth ({num2})";
    P2_DUPLICATE_DIRENT = 0x020041, Clear, 0, Salvage, RESHAPES, "Duplicate entry '{name}' found in directory {dir}.";
    P2_NON_UNIQUE_FILE = 0x020042, Null, 0, Salvage, RESHAPES, "Entry '{name}' in {dirpath} has a non-unique filename.\nRename to {str}";
    P2_REPORT_DUP_DIRENT = 0x020043, None, INFO, -, 0, "Duplicate entry '{name}' found.\n\tMarking {dirpath} to be rebuilt.\n";
    P2_BLOCKS_HI_ZERO = 0x020044, Clear, PREEN_OK, Inode, INODE | MAP, "i_blocks_hi for inode {ino} ({strpath}) is {num}, should be zero.\n";
    P2_INOREF_BG_INO_UNINIT = 0x020046, Fix, PREEN_OK, Unused, ALONE, "Entry '{name}' in {dirpath} references inode {ino} in group {group} where _INODE_UNINIT is set.\n";
    P2_INOREF_IN_UNUSED = 0x020047, Fix, PREEN_OK, Unused, ALONE, "Entry '{name}' in {dirpath} references inode {ino} found in group {group}'s unused inodes area.\n";
    P2_I_FILE_ACL_HI_ZERO = 0x020048, Clear, PREEN_OK, Inode, INODE | MAP, "i_file_acl_hi for inode {ino} ({strpath}) is {num}, should be zero.\n";
    P2_HTREE_ROOT_CSUM_INVALID = 0x020049, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: root node fails checksum.\n";
    P2_HTREE_NODE_CSUM_INVALID = 0x02004A, ClearHtree, PREEN_OK, Salvage, RESHAPES, "Problem in HTREE directory inode {dir}: internal node fails checksum.\n";
    P2_LEAF_NODE_MISSING_CSUM = 0x02004C, Fix, PREEN_OK, Salvage, RESHAPES, "Directory inode {dir}, block #{num}, offset {num2}: directory has no checksum.\n";
    P2_LEAF_NODE_ONLY_CSUM_INVALID = 0x02004D, Fix, PREEN_OK, Dirent, 0, "Directory inode {dir}, block #{num}: directory passes checks but fails checksum.\n";
    P2_BAD_INLINE_DIR_SIZE = 0x02004E, Fix, 0, -, 0, "Inline directory inode {dir} size ({num}) must be a multiple of 4.\n";
    P2_UNENCRYPTED_FILE = 0x020051, Clear, 0, Dirent, RESHAPES, "Encrypted entry '{name}' in {dirpath} references unencrypted inode {ino}.\n";
    P2_INCONSISTENT_ENCRYPTION_POLICY = 0x020052, Clear, 0, Dirent, RESHAPES, "Encrypted entry '{name}' in {dirpath} references inode {ino}, which has a different encryption policy.\n";
    P2_NON_UNIQUE_FILE_NO_RENAME = 0x020054, Clear, 0, Salvage, RESHAPES, "Duplicate filename entry '{name}' in {dirpath} found.";
    P2_BAD_ENCRYPTED_NAME = 0x020050, Clear, 0, Dirent, RESHAPES, "Encrypted entry '{name}' in {dirpath} is too short.\n";
    P2_BAD_ENCODED_NAME = 0x020053, Fix, 0, Dirent, 0, "Entry '{name}' in {dirpath} has illegal UTF-8 characters in its name.\n";

    // ---- Pass 3: connectivity ----
    P3_NO_ROOT_INODE = 0x030001, Allocate, 0, Root, 0, "Root inode not allocated.";
    P3_UNCONNECTED_DIR = 0x030003, Connect, 0, Connect, COUNTS | INODE, "Unconnected directory inode {ino} (was in {dirname})\n";
    P3_EXPAND_LF_DIR = 0x030002, Expand, 0, Lpf, 0, "No room in lost+found directory.";
    P3_NO_LF_DIR = 0x030004, Create, PREEN_OK, Lpf, 0, "/lost+found not found.";
    P3_BAD_DOT_DOT = 0x030005, Fix, PREEN_OK, Dirent, COUNTS, "'..' in {inopath} is {path2} ({dir}), should be {path} ({ino2}).\n";
    P3_LPF_NO_SPACE = 0x030019, Null, 0, Lpf, 0, "Cannot allocate space for /lost+found.\nPlace lost files in root directory instead";
    P3_NO_SPACE_TO_RECOVER = 0x03001A, None, INFO, -, 0, "Insufficient space to recover lost files!\nMove data off the filesystem and re-run e2fsck.\n";
    P3_LPF_NOTDIR = 0x030017, Unlink, 0, Lpf, 0, "/lost+found is not a directory (ino={ino})\n";
    P3_LPF_INLINE_DATA = 0x030018, Clear, 0, Lpf, 0, "/lost+found has inline data\n";
    P3_LPF_ENCRYPTED = 0x03001B, Clear, 0, Lpf, 0, "/lost+found is encrypted\n";
    P3_LOOPED_DIR = 0x03001D, Connect, 0, Connect, COUNTS | INODE, "Recursively looped directory inode {ino} ({dir})\n";

    // ---- Pass 3A: directories rebuilt ----
    // Offered by the repair, once nothing else is left to fix, for each directory e2fsck's
    // pass 3A rebuilds unasked: an unindexed one of three blocks or more on a `dir_index`
    // file system (not /lost+found), and under -D every one. e2fsck says only its pass
    // header, "Pass 3A: Optimizing directories", which the front end prints.
    P3A_OPTIMIZE_DIR_ERR = 0x031002, None, NOT_A_FIX, -, 0, "Failed to optimize directory {dirpath}: {str}";
    P3A_OPTIMIZE_DIR = 0x031004, None, PREEN_OK | NO_OK | NOT_A_FIX | PREEN_NOMSG | NOMSG, Salvage, 0, "Optimizing directory {dir}.";

    // ---- Pass 4: reference counts ----
    P4_ZERO_LEN_INODE = 0x040001, Clear, PREEN_OK | NO_OK, Clear, COUNTS | INODE, "Unattached zero-length inode {ino}.";
    P4_UNATTACHED_INODE = 0x040002, Connect, 0, Connect, COUNTS | INODE, "Unattached inode {ino}\n";
    P4_BAD_REF_COUNT = 0x040003, Fix, PREEN_OK, Inode, COUNTS | INODE | MAP, "Inode {ino} ref count is {num}, should be {num2}.";
    P4_EA_INODE_REF_COUNT = 0x040005, Fix, PREEN_OK, Xattr, 0, "Extended attribute inode {ino} ref count is {num}, should be {num2}. ";
    P4_DIR_NLINK_FEATURE = 0x040006, Fix, 0, Features, COUNTS, "Directory exceeds max links, but no DIR_NLINK feature in superblock.\n";
    // An indexed directory whose count says "overflowed" (1) though it could hold the exact
    // one: set it, but only when the file system may be written (e2fsck asks nothing under -n).
    P4_DIR_OVERFLOW_REF_COUNT = 0x040007, Fix, PREEN_OK, Inode, COUNTS | INODE | MAP, "Directory inode {ino} ref count set to overflow but could be exact value {num2}.  ";

    // ---- Pass 5: group summary information ----
    P5_INODE_BMAP_PADDING = 0x050001, Fix, PREEN_OK, Alloc, SUMMARY, "Padding at end of inode bitmap is not set. ";
    P5_BLOCK_BMAP_PADDING = 0x050002, Fix, PREEN_OK, Alloc, SUMMARY, "Padding at end of block bitmap is not set. ";
    P5_BLOCK_BITMAP_HEADER = 0x050003, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "Block bitmap differences: ";
    P5_BLOCK_UNUSED = 0x050004, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, BlockBitmap, " -{blk}";
    P5_BLOCK_USED = 0x050005, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, BlockBitmap, " +{blk}";
    P5_BLOCK_RANGE_UNUSED = 0x050014, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, BlockBitmap, " -({blk}--{blk2})";
    P5_BLOCK_RANGE_USED = 0x050015, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, BlockBitmap, " +({blk}--{blk2})";
    P5_BLOCK_BITMAP_END = 0x050006, Fix, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "";
    P5_INODE_BITMAP_HEADER = 0x050007, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "Inode bitmap differences: ";
    P5_INODE_UNUSED = 0x050008, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, InodeBitmap, " -{ino}";
    P5_INODE_USED = 0x050009, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, InodeBitmap, " +{ino}";
    P5_INODE_RANGE_UNUSED = 0x050016, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, InodeBitmap, " -({ino}--{ino2})";
    P5_INODE_RANGE_USED = 0x050017, None, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, InodeBitmap, " +({ino}--{ino2})";
    P5_INODE_BITMAP_END = 0x05000A, Fix, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "";
    P5_FREE_INODE_COUNT_GROUP = 0x05000B, Fix, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "Free inodes count wrong for group #{group} ({num}, counted={num2}).\n";
    P5_FREE_DIR_COUNT_GROUP = 0x05000C, Fix, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "Directories count wrong for group #{group} ({num}, counted={num2}).\n";
    P5_FREE_INODE_COUNT = 0x05000D, Fix, PREEN_OK | NO_OK | PREEN_NOMSG, Alloc, SUMMARY, "Free inodes count wrong ({num}, counted={num2}).\n";
    P5_FREE_BLOCK_COUNT_GROUP = 0x05000E, Fix, PREEN_OK | PREEN_NOMSG, Alloc, SUMMARY, "Free blocks count wrong for group #{group} ({num}, counted={num2}).\n";
    P5_FREE_BLOCK_COUNT = 0x05000F, Fix, PREEN_OK | NO_OK | PREEN_NOMSG, Alloc, SUMMARY, "Free blocks count wrong ({num}, counted={num2}).\n";
    P5_BLOCK_UNINIT = 0x050018, Fix, PREEN_OK, Alloc, SUMMARY, "Group {group} block(s) in use but group is marked BLOCK_UNINIT\n";
    // e2fsck's table puts these two in the bitmap-differences latches (their header comes
    // first); ffsck reports them alone.
    P5_INODE_BITMAP_CSUM_INVALID = 0x05001A, Fix, PREEN_OK, Alloc, SUMMARY, "Group {group} inode bitmap does not match checksum.";
    P5_BLOCK_BITMAP_CSUM_INVALID = 0x05001B, Fix, PREEN_OK, Alloc, SUMMARY, "Group {group} block bitmap does not match checksum.";

    // ---- After pass 5: orphan file and quota ----
    P6_RECREATE_JOURNAL = 0x060001, Null, PREEN_OK | NO_OK, NewJournal, 0, "Recreate journal";
    P6_FIX_NOT_MADE = -, None, INFO, -, 0, "The fix answered yes to \"{str}\" could not be made (it is found again after it was applied).\n";
    P6_UPDATE_QUOTAS = 0x060002, Null, PREEN_OK, Quota, SUMMARY | LAST, "Update quota info for quota type {num}";
    P6_ORPHAN_FILE_WITHOUT_JOURNAL = 0x060007, Clear, PREEN_OK, Orphans, 0, "Superblock has orphan file without journal.\n";
    P6_ORPHAN_FILE_CORRUPTED = 0x060009, Recreate, PREEN_OK, Orphans, 0, "Failed to initialize orphan file.\n";
    P6_ORPHAN_BLOCK_DIRTY = 0x06000C, Clear, PREEN_OK, Orphans, 0, "Orphan file (inode {ino}) block {blk} is not clean.\n";
    // e2fsck 1.47 -n exits 4 when this is answered no (checked on a fresh orphan_file image),
    // so unlike its table entry suggests, refusing it leaves an error.
    P6_ORPHAN_PRESENT_CLEAN_FILE = 0x06000D, Clear, PREEN_OK | PREEN_NOMSG, Superblock, 0, "Feature orphan_present is set but orphan file is clean.\n";
    P6_ORPHAN_PRESENT_NO_FILE = 0x06000E, Clear, PREEN_OK, Superblock, 0, "Feature orphan_present is set but feature orphan_file is not.\n";
    P6_ORPHAN_FILE_WRONG_SIZE = 0x06000F, None, 0, -, 0, "Orphan file (inode {ino}) size is not multiple of block size.";
    P6_ORPHAN_FILE_HOLE = 0x060010, None, 0, -, 0, "Orphan file (inode {ino}) contains hole at block {blk}.";
}

impl Problem {
    /// Pass number (0-6; 1B..1E count as 1), from the name's prefix.
    pub fn pass(self) -> u8 {
        self.info().name.as_bytes()[1].wrapping_sub(b'0')
    }
    /// Whether the row is one of passes 1B-1D (which `pass` counts as pass 1).
    pub fn in_pass1bcd(self) -> bool {
        matches!(
            self.info().name.as_bytes(),
            [b'P', b'1', b'B' | b'C' | b'D', b'_', ..]
        )
    }
    /// Whether a fix exists for this problem (the policy answers no to anything else).
    pub(crate) fn fixable(self) -> bool {
        self.info().fixer.is_some()
    }
    /// Whether the fix is made by `fixer`.
    pub(crate) fn fixed_by(self, fixer: Fixer) -> bool {
        self.info().fixer == Some(fixer)
    }
    /// Whether the row's `after` column has all of `bits`.
    pub(crate) fn after(self, bits: u16) -> bool {
        self.info().after & bits == bits
    }
    /// The latch group of the row, if any.
    pub fn latch(self) -> Option<Latch> {
        self.info().latch
    }
}

#[cfg(test)]
mod tests {
    use super::{Problem, ProblemInfo};
    use crate::report::{Finding, Note, ProblemCtx};
    use std::collections::HashMap;

    /// The placeholders `Finding::message` fills.
    const PLACEHOLDERS: &[&str] = &[
        "ino", "ino2", "dir", "dirpath", "dirname", "blk", "blk2", "group", "num", "num:o", "num2",
        "name", "str", "block", "Block", "path", "blk:time", "num:x", "num2:x", "strpath",
        "inopath", "ino:6", "blk:6", "blk2:6", "num:i", "path2",
    ];

    fn placeholders(i: &ProblemInfo) -> Vec<&str> {
        let mut v = Vec::new();
        let mut rest = i.message;
        while let Some(a) = rest.find('{') {
            let Some(b) = rest[a..].find('}') else {
                v.push(&rest[a..]);
                break;
            };
            v.push(&rest[a + 1..a + b]);
            rest = &rest[a + b + 1..];
        }
        v
    }

    #[test]
    fn e2fsck_codes_are_unique_and_in_their_pass() {
        let mut seen: HashMap<u32, &str> = HashMap::new();
        for p in Problem::ALL {
            let i = p.info();
            assert!(
                i.name.starts_with('P') && p.pass() <= 6,
                "{}: no pass prefix",
                i.name
            );
            let Some(code) = i.e2fsck_code else { continue };
            if let Some(other) = seen.insert(code, i.name) {
                panic!("{} and {other} share e2fsck code {code:#08x}", i.name);
            }
            assert_eq!((code >> 16) as u8, p.pass(), "{}: code {code:#08x}", i.name);
        }
    }

    /// The type an entry is given is the one it should have (`num2`), as e2fsck says it.
    #[test]
    fn a_filetype_is_set_to_the_inodes_type() {
        let f = Finding {
            problem: Problem::P2_SET_FILETYPE,
            ctx: ProblemCtx {
                dir: 14,
                num: 0,
                num2: 1,
                name: Some("f0".into()),
                path: Note(Some("/d0".into())),
                ..Default::default()
            },
            fixed: true,
        };
        assert_eq!(
            f.message(),
            "Setting filetype for entry 'f0' in /d0 (14) to 1."
        );
    }

    #[test]
    fn every_placeholder_is_known_and_filled() {
        let full = ProblemCtx {
            ino: 11,
            ino2: 12,
            dir: 2,
            blk: 100,
            blk2: 101,
            group: 3,
            num: 4,
            num2: 5,
            name: Some("name".into()),
            str: Some("str".into()),
            path: Note(Some("/".into())),
            ino_path: Note(Some("/d".into())),
            path2: Note(Some("/e".into())),
            run: 0,
        };
        for &p in Problem::ALL {
            let i = p.info();
            for ph in placeholders(i) {
                assert!(
                    PLACEHOLDERS.contains(&ph),
                    "{}: unknown placeholder {{{ph}}}",
                    i.name
                );
            }
            let f = Finding {
                problem: p,
                ctx: full.clone(),
                fixed: false,
            };
            assert!(!f.message().contains('{'), "{}: {}", i.name, f.message());
        }
    }

    /// Rows that name a directory by path must be given its number (`dir`), and the rows of a
    /// map block (`{block}`) its logical number (`num`): the other fields they would use are
    /// not there.
    #[test]
    fn placeholders_agree_with_each_other() {
        for p in Problem::ALL {
            let ph = placeholders(p.info());
            let has = |s: &str| ph.contains(&s);
            assert!(
                !(has("block") || has("Block")) || !(has("num") || has("num:o")),
                "{:?}: {{block}} is num, so num cannot also be shown",
                p
            );
            assert!(
                !(has("dirpath") && has("dirname")),
                "{:?}: one path per message",
                p
            );
        }
    }

    /// Each latch has members, its question and end belong to no group, all three are of one
    /// pass, and where the question's answer is the group's, every member with a fix is
    /// answered as its question is in every mode.
    #[test]
    fn latch_groups_are_whole() {
        use super::Latch;
        use crate::report::Policy;
        for &l in Latch::ALL {
            let q = l.question();
            let members: Vec<Problem> = Problem::ALL
                .iter()
                .copied()
                .filter(|p| p.latch() == Some(l))
                .collect();
            assert!(!members.is_empty(), "{l:?} has no member");
            assert_eq!(q.latch(), None, "{l:?}: its question is a member");
            assert!(l.end().is_none_or(|e| e.latch().is_none()), "{l:?}: end");
            for &m in &members {
                assert_eq!(m.pass(), q.pass(), "{m:?} and its question {q:?}");
                assert!(l.end().is_none_or(|e| e.pass() == m.pass()), "{m:?}");
                if !l.collates() || !m.fixable() {
                    continue;
                }
                for policy in [Policy::No, Policy::Yes, Policy::Preen] {
                    assert_eq!(
                        policy.answer(m),
                        policy.answer(q),
                        "{m:?} answers unlike its question {q:?} under {policy:?}"
                    );
                }
            }
        }
    }

    /// Every row is reported somewhere in the checker (its name appears outside the
    /// catalogue), or is marked `KEPT` for e2fsck's numbering, and a `KEPT` row is not
    /// reported.
    #[test]
    fn every_row_is_emitted_or_kept() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut text = String::new();
        let mut dirs = vec![root.clone()];
        let mut n = 0;
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("src dir") {
                let path = e.expect("entry").path();
                n += 1;
                assert!(n < 10_000, "source tree too deep");
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "rs")
                    && path != root.join("problem.rs")
                {
                    text += &std::fs::read_to_string(&path).expect("source");
                }
            }
        }
        let named = |p: &Problem| {
            let name = p.info().name;
            [format!("P::{name}"), format!("Problem::{name}")]
                .iter()
                .any(|s| {
                    text.match_indices(s.as_str()).any(|(at, _)| {
                        !text[at + s.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                })
        };
        for p in Problem::ALL {
            let i = p.info();
            // A latch's question and end are reported by `latch::Latches` for its members.
            let latch = super::Latch::ALL
                .iter()
                .find(|l| l.question() == *p || l.end() == Some(*p));
            let named = match latch {
                Some(&l) => Problem::ALL
                    .iter()
                    .any(|m| m.latch() == Some(l) && named(m)),
                None => named(p),
            };
            let kept = i.flags & super::flag::KEPT != 0;
            assert!(
                named != kept,
                "{}: emitted {named}, marked KEPT {kept}",
                i.name
            );
            assert!(
                !kept || i.e2fsck_code.is_some(),
                "{}: KEPT without an e2fsck code",
                i.name
            );
        }
    }
}
