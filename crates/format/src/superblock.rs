//! The raw superblock (`struct ext4_super_block`), byte for byte, plus the few derived values
//! that need more than one field (64-bit counts, block size, checksum seed).

use crate::csum;
use crate::features::{Compat, Incompat, RoCompat};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 1024-byte superblock, as the kernel lays it out.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone)]
#[repr(C)]
pub struct RawSuperblock {
    pub s_inodes_count: U32,            // 0x00
    pub s_blocks_count_lo: U32,         // 0x04
    pub s_r_blocks_count_lo: U32,       // 0x08
    pub s_free_blocks_count_lo: U32,    // 0x0C
    pub s_free_inodes_count: U32,       // 0x10
    pub s_first_data_block: U32,        // 0x14
    pub s_log_block_size: U32,          // 0x18
    pub s_log_cluster_size: U32,        // 0x1C
    pub s_blocks_per_group: U32,        // 0x20
    pub s_clusters_per_group: U32,      // 0x24
    pub s_inodes_per_group: U32,        // 0x28
    pub s_mtime: U32,                   // 0x2C
    pub s_wtime: U32,                   // 0x30
    pub s_mnt_count: U16,               // 0x34
    pub s_max_mnt_count: U16,           // 0x36
    pub s_magic: U16,                   // 0x38
    pub s_state: U16,                   // 0x3A
    pub s_errors: U16,                  // 0x3C
    pub s_minor_rev_level: U16,         // 0x3E
    pub s_lastcheck: U32,               // 0x40
    pub s_checkinterval: U32,           // 0x44
    pub s_creator_os: U32,              // 0x48
    pub s_rev_level: U32,               // 0x4C
    pub s_def_resuid: U16,              // 0x50
    pub s_def_resgid: U16,              // 0x52
    pub s_first_ino: U32,               // 0x54
    pub s_inode_size: U16,              // 0x58
    pub s_block_group_nr: U16,          // 0x5A
    pub s_feature_compat: U32,          // 0x5C
    pub s_feature_incompat: U32,        // 0x60
    pub s_feature_ro_compat: U32,       // 0x64
    pub s_uuid: [u8; 16],               // 0x68
    pub s_volume_name: [u8; 16],        // 0x78
    pub s_last_mounted: [u8; 64],       // 0x88
    pub s_algorithm_usage_bitmap: U32,  // 0xC8
    pub s_prealloc_blocks: u8,          // 0xCC
    pub s_prealloc_dir_blocks: u8,      // 0xCD
    pub s_reserved_gdt_blocks: U16,     // 0xCE
    pub s_journal_uuid: [u8; 16],       // 0xD0
    pub s_journal_inum: U32,            // 0xE0
    pub s_journal_dev: U32,             // 0xE4
    pub s_last_orphan: U32,             // 0xE8
    pub s_hash_seed: [U32; 4],          // 0xEC
    pub s_def_hash_version: u8,         // 0xFC
    pub s_jnl_backup_type: u8,          // 0xFD
    pub s_desc_size: U16,               // 0xFE
    pub s_default_mount_opts: U32,      // 0x100
    pub s_first_meta_bg: U32,           // 0x104
    pub s_mkfs_time: U32,               // 0x108
    pub s_jnl_blocks: [U32; 17],        // 0x10C
    pub s_blocks_count_hi: U32,         // 0x150
    pub s_r_blocks_count_hi: U32,       // 0x154
    pub s_free_blocks_count_hi: U32,    // 0x158
    pub s_min_extra_isize: U16,         // 0x15C
    pub s_want_extra_isize: U16,        // 0x15E
    pub s_flags: U32,                   // 0x160
    pub s_raid_stride: U16,             // 0x164
    pub s_mmp_update_interval: U16,     // 0x166
    pub s_mmp_block: U64,               // 0x168
    pub s_raid_stripe_width: U32,       // 0x170
    pub s_log_groups_per_flex: u8,      // 0x174
    pub s_checksum_type: u8,            // 0x175
    pub s_encryption_level: u8,         // 0x176
    pub s_reserved_pad: u8,             // 0x177
    pub s_kbytes_written: U64,          // 0x178
    pub s_snapshot_inum: U32,           // 0x180
    pub s_snapshot_id: U32,             // 0x184
    pub s_snapshot_r_blocks_count: U64, // 0x188
    pub s_snapshot_list: U32,           // 0x190
    pub s_error_count: U32,             // 0x194
    pub s_first_error_time: U32,        // 0x198
    pub s_first_error_ino: U32,         // 0x19C
    pub s_first_error_block: U64,       // 0x1A0
    pub s_first_error_func: [u8; 32],   // 0x1A8
    pub s_first_error_line: U32,        // 0x1C8
    pub s_last_error_time: U32,         // 0x1CC
    pub s_last_error_ino: U32,          // 0x1D0
    pub s_last_error_line: U32,         // 0x1D4
    pub s_last_error_block: U64,        // 0x1D8
    pub s_last_error_func: [u8; 32],    // 0x1E0
    pub s_mount_opts: [u8; 64],         // 0x200
    pub s_usr_quota_inum: U32,          // 0x240
    pub s_grp_quota_inum: U32,          // 0x244
    pub s_overhead_clusters: U32,       // 0x248
    pub s_backup_bgs: [U32; 2],         // 0x24C
    pub s_encrypt_algos: [u8; 4],       // 0x254
    pub s_encrypt_pw_salt: [u8; 16],    // 0x258
    pub s_lpf_ino: U32,                 // 0x268
    pub s_prj_quota_inum: U32,          // 0x26C
    pub s_checksum_seed: U32,           // 0x270
    pub s_wtime_hi: u8,                 // 0x274
    pub s_mtime_hi: u8,                 // 0x275
    pub s_mkfs_time_hi: u8,             // 0x276
    pub s_lastcheck_hi: u8,             // 0x277
    pub s_first_error_time_hi: u8,      // 0x278
    pub s_last_error_time_hi: u8,       // 0x279
    pub s_first_error_errcode: u8,      // 0x27A
    pub s_last_error_errcode: u8,       // 0x27B
    pub s_encoding: U16,                // 0x27C
    pub s_encoding_flags: U16,          // 0x27E
    pub s_orphan_file_inum: U32,        // 0x280
    pub s_reserved: [U32; 94],          // 0x284
    pub s_checksum: U32,                // 0x3FC
}
const _: () = assert!(core::mem::size_of::<RawSuperblock>() == 1024);

/// `s_state` bits.
pub const STATE_VALID: u16 = 0x0001;
pub const STATE_ERROR: u16 = 0x0002;
pub const STATE_ORPHANS: u16 = 0x0004;

/// `s_flags`: directory names were hashed as signed, or as unsigned, chars.
pub const FLAGS_SIGNED_HASH: u32 = 0x1;
pub const FLAGS_UNSIGNED_HASH: u32 = 0x2;

/// `s_checksum_type` value for crc32c, the only one defined.
pub const CHECKSUM_TYPE_CRC32C: u8 = 1;

impl RawSuperblock {
    /// Parse the first 1024 bytes of `buf`; `None` if it is shorter.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        Self::read_from_prefix(buf).ok().map(|(sb, _)| sb)
    }
    pub fn compat(&self) -> Compat {
        Compat(self.s_feature_compat.get())
    }
    pub fn incompat(&self) -> Incompat {
        Incompat(self.s_feature_incompat.get())
    }
    pub fn ro_compat(&self) -> RoCompat {
        RoCompat(self.s_feature_ro_compat.get())
    }
    pub fn is_64bit(&self) -> bool {
        self.incompat().has(Incompat::SIXTY_FOUR_BIT)
    }
    pub fn has_metadata_csum(&self) -> bool {
        self.ro_compat().has(RoCompat::METADATA_CSUM)
    }
    /// Directory names are hashed as unsigned chars (the legacy, half-MD4 and TEA hashes
    /// then use their unsigned versions).
    pub fn unsigned_dir_hash(&self) -> bool {
        self.s_flags.get() & FLAGS_UNSIGNED_HASH != 0
    }
    /// Group descriptors carry a checksum (crc16 with `uninit_bg`, crc32c with `metadata_csum`).
    pub fn has_group_csum(&self) -> bool {
        self.has_metadata_csum() || self.ro_compat().has(RoCompat::GDT_CSUM)
    }
    fn hi(&self, v: U32) -> u64 {
        if self.is_64bit() {
            u64::from(v.get()) << 32
        } else {
            0
        }
    }
    pub fn blocks_count(&self) -> u64 {
        u64::from(self.s_blocks_count_lo.get()) | self.hi(self.s_blocks_count_hi)
    }
    pub fn r_blocks_count(&self) -> u64 {
        u64::from(self.s_r_blocks_count_lo.get()) | self.hi(self.s_r_blocks_count_hi)
    }
    pub fn free_blocks_count(&self) -> u64 {
        u64::from(self.s_free_blocks_count_lo.get()) | self.hi(self.s_free_blocks_count_hi)
    }
    pub fn set_free_blocks_count(&mut self, v: u64) {
        self.s_free_blocks_count_lo.set(v as u32);
        if self.is_64bit() {
            self.s_free_blocks_count_hi.set((v >> 32) as u32);
        }
    }
    /// Recompute and store `s_checksum` (with `metadata_csum`).
    pub fn update_checksum(&mut self) {
        if self.has_metadata_csum() {
            let c = self.compute_checksum();
            self.s_checksum.set(c);
        }
    }
    /// The seed of every metadata checksum: the stored seed or the crc of the UUID.
    pub fn csum_seed(&self) -> u32 {
        if self.incompat().has(Incompat::CSUM_SEED) {
            self.s_checksum_seed.get()
        } else {
            csum::ext4_crc32c(!0, &self.s_uuid)
        }
    }
    /// Checksum the superblock would have with `metadata_csum`.
    pub fn compute_checksum(&self) -> u32 {
        csum::ext4_crc32c(!0, &self.as_bytes()[..0x3FC])
    }
    pub fn checksum_ok(&self) -> bool {
        !self.has_metadata_csum() || self.compute_checksum() == self.s_checksum.get()
    }
    /// Volume label as text (lossy).
    pub fn label(&self) -> String {
        let end = self
            .s_volume_name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(16);
        String::from_utf8_lossy(&self.s_volume_name[..end]).into_owned()
    }
    pub fn uuid_string(&self) -> String {
        let u = &self.s_uuid;
        format!(
            "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
        )
    }
}
