//! Feature flags of the superblock (`s_feature_compat`, `_incompat`, `_ro_compat`).
//!
//! Kept as plain bit constants with a name table, so that messages can name an unknown bit and
//! the checker can refuse exactly the incompat features it does not understand.

macro_rules! feature_set {
    ($(#[$m:meta])* $name:ident { $($flag:ident = $bit:expr, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
        pub struct $name(pub u32);
        impl $name {
            $(pub const $flag: u32 = $bit;)*
            /// Every bit this version of ffsck knows how to handle.
            pub const KNOWN: u32 = 0 $(| $bit)*;
            /// (bit, name) pairs in the spelling mke2fs and dumpe2fs use.
            pub const NAMES: &'static [(u32, &'static str)] = &[$(($bit, $text)),*];
            pub fn has(self, bit: u32) -> bool { self.0 & bit != 0 }
            /// Bits that are set but not known to us.
            pub fn unknown(self) -> u32 { self.0 & !Self::KNOWN }
            /// Names of the set bits, unknown ones as `FEATURE_X<bit>`.
            pub fn names(self) -> Vec<String> {
                (0..32).map(|i| 1u32 << i).filter(|b| self.0 & b != 0).map(|b| {
                    Self::NAMES.iter().find(|(v, _)| *v == b).map(|(_, n)| n.to_string())
                        .unwrap_or_else(|| format!("FEATURE_{}{}", stringify!($name).chars().next().unwrap_or('X'), b.trailing_zeros()))
                }).collect()
            }
        }
    };
}

feature_set!(
    /// Compatible features: safe to ignore for a checker that does not know them.
    Compat {
        DIR_PREALLOC = 0x0001, "dir_prealloc";
        IMAGIC_INODES = 0x0002, "imagic_inodes";
        HAS_JOURNAL = 0x0004, "has_journal";
        EXT_ATTR = 0x0008, "ext_attr";
        RESIZE_INODE = 0x0010, "resize_inode";
        DIR_INDEX = 0x0020, "dir_index";
        LAZY_BG = 0x0040, "lazy_bg";
        EXCLUDE_BITMAP = 0x0100, "snapshot_bitmap";
        SPARSE_SUPER2 = 0x0200, "sparse_super2";
        FAST_COMMIT = 0x0400, "fast_commit";
        STABLE_INODES = 0x0800, "stable_inodes";
        ORPHAN_FILE = 0x1000, "orphan_file";
    }
);

feature_set!(
    /// Incompatible features: a checker that does not know one must refuse the file system.
    Incompat {
        COMPRESSION = 0x0001, "compression";
        FILETYPE = 0x0002, "filetype";
        RECOVER = 0x0004, "needs_recovery";
        JOURNAL_DEV = 0x0008, "journal_dev";
        META_BG = 0x0010, "meta_bg";
        EXTENTS = 0x0040, "extent";
        SIXTY_FOUR_BIT = 0x0080, "64bit";
        MMP = 0x0100, "mmp";
        FLEX_BG = 0x0200, "flex_bg";
        EA_INODE = 0x0400, "ea_inode";
        DIRDATA = 0x1000, "dirdata";
        CSUM_SEED = 0x2000, "metadata_csum_seed";
        LARGEDIR = 0x4000, "large_dir";
        INLINE_DATA = 0x8000, "inline_data";
        ENCRYPT = 0x10000, "encrypt";
        CASEFOLD = 0x20000, "casefold";
    }
);

feature_set!(
    /// Read-only compatible features: unknown ones forbid writing, not reading.
    RoCompat {
        SPARSE_SUPER = 0x0001, "sparse_super";
        LARGE_FILE = 0x0002, "large_file";
        BTREE_DIR = 0x0004, "btree_dir";
        HUGE_FILE = 0x0008, "huge_file";
        GDT_CSUM = 0x0010, "uninit_bg";
        DIR_NLINK = 0x0020, "dir_nlink";
        EXTRA_ISIZE = 0x0040, "extra_isize";
        HAS_SNAPSHOT = 0x0080, "snapshot";
        QUOTA = 0x0100, "quota";
        BIGALLOC = 0x0200, "bigalloc";
        METADATA_CSUM = 0x0400, "metadata_csum";
        REPLICA = 0x0800, "replica";
        READONLY = 0x1000, "read-only";
        PROJECT = 0x2000, "project";
        SHARED_BLOCKS = 0x4000, "shared_blocks";
        VERITY = 0x8000, "verity";
        ORPHAN_PRESENT = 0x10000, "orphan_present";
    }
);

impl Compat {
    /// Compatible bits that e2fsck 1.47 refuses ("has unsupported feature(s)"), and so do we:
    /// unknown ones, and `lazy_bg` and `snapshot_bitmap`, which libext2fs names but does not
    /// support.
    pub fn unsupported(self) -> u32 {
        self.unknown() | (self.0 & (Self::LAZY_BG | Self::EXCLUDE_BITMAP))
    }
}

impl RoCompat {
    /// Read-only-compatible bits that e2fsck 1.47 refuses ("has unsupported read-only
    /// feature(s)"), and so do we: unknown ones, and `btree_dir`, `snapshot` and `replica`,
    /// which libext2fs names but does not support.
    pub fn unsupported(self) -> u32 {
        self.unknown() | (self.0 & (Self::BTREE_DIR | Self::HAS_SNAPSHOT | Self::REPLICA))
    }
}

impl Incompat {
    /// Incompat bits that e2fsck 1.47 refuses outright (and so do we).
    pub fn unsupported(self) -> u32 {
        self.unknown() | (self.0 & (Self::COMPRESSION | Self::DIRDATA))
    }
}
