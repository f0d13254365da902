//! One logged write to an image: where, which field, the bytes before and after, and why. The
//! ext corruptions and XFS blocktrash both describe their damage this way, so a manifest can be
//! checked against the image and undone byte for byte.

use serde::{Deserialize, Serialize};

/// One write to the image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Change {
    pub offset: u64,
    /// Field name, e.g. `inode[12].i_links_count` or `gd[0]+0x1e (bg_checksum)`.
    pub field: String,
    /// Hex.
    pub old: String,
    pub new: String,
    /// `damage` or `checksum` (a fix-up made with `--csum fix`).
    pub role: String,
}

/// Lower-case hex of `b`, two digits a byte.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses the hex of a manifest back into bytes.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
