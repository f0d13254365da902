//! A name → (offset, size) table for the fields of each raw structure, so tools can address
//! on-disk fields by their kernel names (`sb.s_inodes_count`, `inode.i_links_count`).

/// (name, byte offset, size in bytes)
pub type Field = (&'static str, usize, usize);

pub const SUPERBLOCK: &[Field] = &[
    ("s_inodes_count", 0x00, 4),
    ("s_blocks_count_lo", 0x04, 4),
    ("s_r_blocks_count_lo", 0x08, 4),
    ("s_free_blocks_count_lo", 0x0C, 4),
    ("s_free_inodes_count", 0x10, 4),
    ("s_first_data_block", 0x14, 4),
    ("s_log_block_size", 0x18, 4),
    ("s_log_cluster_size", 0x1C, 4),
    ("s_blocks_per_group", 0x20, 4),
    ("s_clusters_per_group", 0x24, 4),
    ("s_inodes_per_group", 0x28, 4),
    ("s_mtime", 0x2C, 4),
    ("s_wtime", 0x30, 4),
    ("s_mnt_count", 0x34, 2),
    ("s_max_mnt_count", 0x36, 2),
    ("s_magic", 0x38, 2),
    ("s_state", 0x3A, 2),
    ("s_errors", 0x3C, 2),
    ("s_minor_rev_level", 0x3E, 2),
    ("s_lastcheck", 0x40, 4),
    ("s_checkinterval", 0x44, 4),
    ("s_creator_os", 0x48, 4),
    ("s_rev_level", 0x4C, 4),
    ("s_def_resuid", 0x50, 2),
    ("s_def_resgid", 0x52, 2),
    ("s_first_ino", 0x54, 4),
    ("s_inode_size", 0x58, 2),
    ("s_block_group_nr", 0x5A, 2),
    ("s_feature_compat", 0x5C, 4),
    ("s_feature_incompat", 0x60, 4),
    ("s_feature_ro_compat", 0x64, 4),
    ("s_uuid", 0x68, 16),
    ("s_volume_name", 0x78, 16),
    ("s_reserved_gdt_blocks", 0xCE, 2),
    ("s_journal_inum", 0xE0, 4),
    ("s_journal_dev", 0xE4, 4),
    ("s_last_orphan", 0xE8, 4),
    ("s_def_hash_version", 0xFC, 1),
    ("s_desc_size", 0xFE, 2),
    ("s_first_meta_bg", 0x104, 4),
    ("s_blocks_count_hi", 0x150, 4),
    ("s_free_blocks_count_hi", 0x158, 4),
    ("s_min_extra_isize", 0x15C, 2),
    ("s_want_extra_isize", 0x15E, 2),
    ("s_flags", 0x160, 4),
    ("s_log_groups_per_flex", 0x174, 1),
    ("s_checksum_type", 0x175, 1),
    ("s_usr_quota_inum", 0x240, 4),
    ("s_grp_quota_inum", 0x244, 4),
    ("s_backup_bgs", 0x24C, 8),
    ("s_lpf_ino", 0x268, 4),
    ("s_prj_quota_inum", 0x26C, 4),
    ("s_checksum_seed", 0x270, 4),
    ("s_encoding", 0x27C, 2),
    ("s_orphan_file_inum", 0x280, 4),
    ("s_checksum", 0x3FC, 4),
];

pub const GROUP_DESC: &[Field] = &[
    ("bg_block_bitmap_lo", 0x00, 4),
    ("bg_inode_bitmap_lo", 0x04, 4),
    ("bg_inode_table_lo", 0x08, 4),
    ("bg_free_blocks_count_lo", 0x0C, 2),
    ("bg_free_inodes_count_lo", 0x0E, 2),
    ("bg_used_dirs_count_lo", 0x10, 2),
    ("bg_flags", 0x12, 2),
    ("bg_exclude_bitmap_lo", 0x14, 4),
    ("bg_block_bitmap_csum_lo", 0x18, 2),
    ("bg_inode_bitmap_csum_lo", 0x1A, 2),
    ("bg_itable_unused_lo", 0x1C, 2),
    ("bg_checksum", 0x1E, 2),
    ("bg_block_bitmap_hi", 0x20, 4),
    ("bg_inode_bitmap_hi", 0x24, 4),
    ("bg_inode_table_hi", 0x28, 4),
    ("bg_free_blocks_count_hi", 0x2C, 2),
    ("bg_free_inodes_count_hi", 0x2E, 2),
    ("bg_used_dirs_count_hi", 0x30, 2),
    ("bg_itable_unused_hi", 0x32, 2),
    ("bg_exclude_bitmap_hi", 0x34, 4),
    ("bg_block_bitmap_csum_hi", 0x38, 2),
    ("bg_inode_bitmap_csum_hi", 0x3A, 2),
];

pub const INODE: &[Field] = &[
    ("i_mode", 0x00, 2),
    ("i_uid", 0x02, 2),
    ("i_size_lo", 0x04, 4),
    ("i_atime", 0x08, 4),
    ("i_ctime", 0x0C, 4),
    ("i_mtime", 0x10, 4),
    ("i_dtime", 0x14, 4),
    ("i_gid", 0x18, 2),
    ("i_links_count", 0x1A, 2),
    ("i_blocks_lo", 0x1C, 4),
    ("i_flags", 0x20, 4),
    ("l_i_version", 0x24, 4),
    ("i_block", 0x28, 60),
    ("i_generation", 0x64, 4),
    ("i_file_acl_lo", 0x68, 4),
    ("i_size_high", 0x6C, 4),
    ("i_obso_faddr", 0x70, 4),
    ("l_i_blocks_high", 0x74, 2),
    ("l_i_file_acl_high", 0x76, 2),
    ("l_i_uid_high", 0x78, 2),
    ("l_i_gid_high", 0x7A, 2),
    ("l_i_checksum_lo", 0x7C, 2),
    ("i_extra_isize", 0x80, 2),
    ("i_checksum_hi", 0x82, 2),
    ("i_crtime", 0x90, 4),
    ("i_projid", 0x9C, 4),
];

pub const EXTENT_HEADER: &[Field] = &[
    ("eh_magic", 0, 2),
    ("eh_entries", 2, 2),
    ("eh_max", 4, 2),
    ("eh_depth", 6, 2),
    ("eh_generation", 8, 4),
];
pub const EXTENT: &[Field] = &[
    ("ee_block", 0, 4),
    ("ee_len", 4, 2),
    ("ee_start_hi", 6, 2),
    ("ee_start_lo", 8, 4),
];
pub const EXTENT_INDEX: &[Field] = &[
    ("ei_block", 0, 4),
    ("ei_leaf_lo", 4, 4),
    ("ei_leaf_hi", 8, 2),
    ("ei_unused", 10, 2),
];
/// The htree root after `.` and `..`: `dx_root_info`, then the count/limit header and the
/// first entry's block (offsets from the start of block 0 of the directory).
pub const DX_ROOT: &[Field] = &[
    ("reserved_zero", 0x18, 4),
    ("hash_version", 0x1C, 1),
    ("info_length", 0x1D, 1),
    ("indirect_levels", 0x1E, 1),
    ("unused_flags", 0x1F, 1),
    ("limit", 0x20, 2),
    ("count", 0x22, 2),
    ("block", 0x24, 4),
];
/// The jbd2 superblock; unlike everything else here its fields are **big-endian**.
pub const JOURNAL_SB: &[Field] = &[
    ("h_magic", 0x00, 4),
    ("h_blocktype", 0x04, 4),
    ("h_sequence", 0x08, 4),
    ("s_blocksize", 0x0C, 4),
    ("s_maxlen", 0x10, 4),
    ("s_first", 0x14, 4),
    ("s_sequence", 0x18, 4),
    ("s_start", 0x1C, 4),
    ("s_errno", 0x20, 4),
    ("s_feature_compat", 0x24, 4),
    ("s_feature_incompat", 0x28, 4),
    ("s_feature_ro_compat", 0x2C, 4),
    ("s_uuid", 0x30, 16),
    ("s_nr_users", 0x40, 4),
    ("s_max_transaction", 0x48, 4),
    ("s_checksum_type", 0x50, 1),
    ("s_num_fc_blks", 0x54, 4),
    ("s_checksum", 0xFC, 4),
];
pub const DIRENT: &[Field] = &[
    ("inode", 0, 4),
    ("rec_len", 4, 2),
    ("name_len", 6, 1),
    ("file_type", 7, 1),
];
pub const XATTR_HEADER: &[Field] = &[
    ("h_magic", 0, 4),
    ("h_refcount", 4, 4),
    ("h_blocks", 8, 4),
    ("h_hash", 12, 4),
    ("h_checksum", 16, 4),
];

/// Look up a field by name in a table.
pub fn find(table: &[Field], name: &str) -> Option<Field> {
    table.iter().copied().find(|f| f.0 == name)
}
