//! Encryption policies, as e2fsck tracks them: every inode with the encrypt flag must carry an
//! encryption context (attribute index 9, name `c`); its policy (the context without its
//! nonce) gets a small id, the same for equal policies, so pass 2 can check that everything
//! an encrypted directory names shares its policy.

use crate::fs::Fs;
use ffsck_format::inode::{RawInode, GOOD_OLD_INODE_SIZE};
use ffsck_format::xattr::{parse_entries, IBODY_MAGIC, XATTR_MAGIC};
use std::collections::HashMap;

/// Policy id of a context whose version this checker does not know (equal to itself only).
pub const UNRECOGNIZED: u32 = u32::MAX - 2;
/// Attribute index of the encryption context.
const INDEX_ENCRYPTION: u8 = 9;

/// What an encrypted inode's context says.
pub(crate) enum Context {
    /// No context attribute (or the attributes cannot be read).
    Missing,
    /// A context of a known version with the wrong size, or version 0.
    Corrupt,
    /// A context of a version this checker does not know.
    Unrecognized,
    /// The policy: the context without its nonce.
    Policy(Vec<u8>),
}

/// Policy ids, assigned as policies are first seen.
#[derive(Default)]
pub(crate) struct Policies(HashMap<Vec<u8>, u32>);

impl Policies {
    pub fn id(&mut self, policy: Vec<u8>) -> u32 {
        let next = self.0.len() as u32;
        *self.0.entry(policy).or_insert(next)
    }
}

/// The value of the encryption context attribute in `area` (entries from `first`, values
/// from `base`).
fn find(area: &[u8], first: usize, base: usize) -> Option<Vec<u8>> {
    let entries = parse_entries(area, first, base).ok()?;
    let e = entries
        .into_iter()
        .find(|e| e.raw.e_name_index == INDEX_ENCRYPTION && e.name == b"c")?;
    let off = base + usize::from(e.raw.e_value_offs.get());
    area.get(off..off + e.raw.e_value_size.get() as usize)
        .map(<[u8]>::to_vec)
}

/// Read the encryption context of the inode `raw` (in the inode, else in its attribute
/// block) and judge it as e2fsck does.
pub(crate) fn context(fs: &Fs, raw: &[u8]) -> Context {
    let inode = RawInode::parse(raw);
    let start = GOOD_OLD_INODE_SIZE + usize::from(inode.extra_isize());
    let in_body = (start + 4 <= raw.len() && raw[start..start + 4] == IBODY_MAGIC.to_le_bytes())
        .then(|| find(&raw[start..], 4, 4))
        .flatten();
    let value = in_body.or_else(|| {
        let blk = inode.file_acl(fs.geo.sixty_four_bit());
        if blk == 0 || !fs.geo.is_valid_block(blk) {
            return None;
        }
        let buf = fs.read_block(blk)?;
        (buf.len() >= 32 && buf[0..4] == XATTR_MAGIC.to_le_bytes())
            .then(|| find(&buf, 32, 0))
            .flatten()
    });
    let Some(v) = value else {
        return Context::Missing;
    };
    // Version, modes and flags, then the key (v1: 8-byte descriptor; v2: 4 reserved bytes
    // and a 16-byte identifier), then a 16-byte nonce.
    match v.first() {
        None | Some(0) => Context::Corrupt,
        Some(1) if v.len() == 28 => Context::Policy(v[..12].to_vec()),
        Some(2) if v.len() == 40 => Context::Policy(v[..24].to_vec()),
        Some(1 | 2) => Context::Corrupt,
        Some(_) => Context::Unrecognized,
    }
}
