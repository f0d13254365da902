//! Directory entries: one bounded iterator over the linear entries of a directory block (or
//! of an inline directory's area), where damage is a value the caller judges, not an error.
//!
//! The framing rules are the kernel's and e2fsck's: an entry is at least 12 bytes, its
//! `rec_len` a multiple of 4 that stays inside the area, and its name fits its record. The
//! first entry that breaks them ends the walk with [`Step::Damaged`]; nothing after it is
//! trusted. Each good step advances at least 12 bytes, and the walk takes at most
//! `len / 12 + 1` steps, so no block, however hostile, makes it loop.
//!
//! The checksum tail of a leaf block is itself an entry (inode 0, 12 bytes, type 0xDE): walk
//! [`leaf_entries`] for the entries before it, or `format::dir::verify_leaf` for the verdict
//! on the tail and its checksum.

use ffsck_format::dir::{self as fdir, header_at, DirentHeader};

/// A name as e2fsck prints it: a byte past 128 as `M-` and the byte less 128, a control
/// character (or DEL) as `^` and the character it is a control of (`^@`, `^A`, `^?`).
pub(crate) fn display_name(raw: &[u8]) -> String {
    let mut s = String::with_capacity(raw.len());
    for &b in raw {
        let mut c = b;
        if c > 128 {
            s.push_str("M-");
            c -= 128;
        }
        if c < 32 || c == 0x7f {
            s.push('^');
            c ^= 0x40;
        }
        s.push(char::from(c));
    }
    s
}

/// One well-formed entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    /// Offset of the entry in the area walked.
    pub off: usize,
    pub inode: u32,
    /// The decoded record length (at least 12, a multiple of 4).
    pub rec_len: usize,
    pub file_type: u8,
    /// `name_len` bytes of name.
    pub name: &'a [u8],
}

/// How an entry's framing is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// Fewer than 8 bytes remain for the header.
    Truncated,
    /// `rec_len` is under 12, not a multiple of 4, or runs past the end of the area.
    RecLen,
    /// The name does not fit in the record.
    NameLen,
}

/// What the walk found at one offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    Entry(Entry<'a>),
    /// The walk ends here. `header` is what the 8 bytes at `off` say, if there were 8.
    Damaged {
        off: usize,
        damage: Damage,
        header: Option<DirentHeader>,
    },
}

/// The entries of `area` (a whole block, or the part of it before the tail, or an inline
/// directory's bytes), whose record lengths are decoded for a block of `block_size` bytes.
pub(crate) fn entries(area: &[u8], block_size: u32) -> Entries<'_> {
    Entries {
        area,
        block_size,
        off: 0,
        steps: area.len() / 12 + 1,
    }
}

/// The entries of a leaf block before its checksum tail (all of them when it has none).
pub(crate) fn leaf_entries(block: &[u8]) -> Entries<'_> {
    entries(leaf_area(block), block.len() as u32)
}

/// The part of a leaf block its entries may use: before the checksum tail if it has one.
pub(crate) fn leaf_area(block: &[u8]) -> &[u8] {
    if fdir::has_tail(block) {
        &block[..block.len() - fdir::TAIL_SIZE]
    } else {
        block
    }
}

/// See [`entries`].
pub(crate) struct Entries<'a> {
    area: &'a [u8],
    block_size: u32,
    off: usize,
    /// Steps left: the walk's bound.
    steps: usize,
}

impl<'a> Entries<'a> {
    /// The well-formed entries only, ending silently at the first damaged one.
    pub fn good(self) -> impl Iterator<Item = Entry<'a>> {
        self.map_while(|s| match s {
            Step::Entry(e) => Some(e),
            Step::Damaged { .. } => None,
        })
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Step<'a>;

    fn next(&mut self) -> Option<Step<'a>> {
        if self.steps == 0 || self.off >= self.area.len() {
            return None;
        }
        self.steps -= 1;
        let off = self.off;
        let Some(h) = header_at(self.area, off, self.block_size) else {
            self.steps = 0;
            return Some(Step::Damaged {
                off,
                damage: Damage::Truncated,
                header: None,
            });
        };
        let rec_len = h.rec_len as usize;
        let name_len = usize::from(h.name_len);
        let damage =
            if off + rec_len > self.area.len() || rec_len < 12 || !rec_len.is_multiple_of(4) {
                Some(Damage::RecLen)
            } else if fdir::rec_len_for(name_len) as usize > rec_len {
                Some(Damage::NameLen)
            } else {
                None
            };
        if let Some(damage) = damage {
            self.steps = 0;
            return Some(Step::Damaged {
                off,
                damage,
                header: Some(h),
            });
        }
        self.off = off + rec_len;
        Some(Step::Entry(Entry {
            off,
            inode: h.inode,
            rec_len,
            file_type: h.file_type,
            name: &self.area[off + 8..off + 8 + name_len],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names print as e2fsck's `safe_print` prints them: bytes past 128 as `M-`, control
    /// characters and DEL as `^`, 128 itself as it is.
    #[test]
    fn names_print_with_e2fsck_escapes() {
        assert_eq!(display_name(b"plain.txt"), "plain.txt");
        assert_eq!(display_name(&[b'a', 0, 0x0a, 0x7f]), "a^@^J^?");
        assert_eq!(display_name(&[0xc1, 0x81, 0xff, 0xa0]), "M-AM-^AM-^?M- ");
        assert_eq!(display_name(&[0x80]), "\u{80}");
    }

    /// Put an entry at `off` of `b`.
    fn put(b: &mut [u8], off: usize, ino: u32, rec_len: u16, name: &[u8], ft: u8) {
        b[off..off + 4].copy_from_slice(&ino.to_le_bytes());
        b[off + 4..off + 6].copy_from_slice(&rec_len.to_le_bytes());
        b[off + 6] = name.len() as u8;
        b[off + 7] = ft;
        b[off + 8..off + 8 + name.len()].copy_from_slice(name);
    }

    /// A 1 KiB block: `.`, `..`, `file`, the rest one empty entry.
    fn block() -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        put(&mut b, 0, 2, 12, b".", 2);
        put(&mut b, 12, 2, 12, b"..", 2);
        put(&mut b, 24, 12, 16, b"file", 1);
        put(&mut b, 40, 0, 1024 - 40, b"", 0);
        b
    }

    #[test]
    fn walks_every_entry_of_a_good_block() {
        let b = block();
        let steps: Vec<_> = entries(&b, 1024).collect();
        assert_eq!(steps.len(), 4);
        let Step::Entry(e) = steps[2] else {
            panic!("{:?}", steps[2]);
        };
        assert_eq!(
            (e.off, e.inode, e.rec_len, e.name, e.file_type),
            (24, 12, 16, &b"file"[..], 1)
        );
        assert_eq!(entries(&b, 1024).good().count(), 4);
    }

    #[test]
    fn a_rec_len_too_small_unaligned_or_past_the_end_ends_the_walk() {
        for bad in [8u16, 14, 1024] {
            let mut b = block();
            b[24 + 4..24 + 6].copy_from_slice(&bad.to_le_bytes());
            let steps: Vec<_> = entries(&b, 1024).collect();
            assert_eq!(steps.len(), 3, "rec_len {bad}");
            assert!(
                matches!(
                    steps[2],
                    Step::Damaged {
                        off: 24,
                        damage: Damage::RecLen,
                        header: Some(_)
                    }
                ),
                "rec_len {bad}: {:?}",
                steps[2]
            );
            assert_eq!(entries(&b, 1024).good().count(), 2);
        }
    }

    #[test]
    fn a_name_past_its_record_is_damage() {
        let mut b = block();
        b[24 + 6] = 9; // 8 + 9 rounds up to 20 > 16
        let last = entries(&b, 1024).last();
        assert!(
            matches!(
                last,
                Some(Step::Damaged {
                    off: 24,
                    damage: Damage::NameLen,
                    ..
                })
            ),
            "{last:?}"
        );
        // The name of the last entry cannot run past the block either.
        let mut b = block();
        b[40 + 4..40 + 6].copy_from_slice(&((1024 - 40 - 16) as u16).to_le_bytes());
        put(&mut b, 1008, 5, 16, b"", 1);
        b[1008 + 6] = 255;
        let steps: Vec<_> = entries(&b, 1024).collect();
        assert!(
            matches!(
                steps.last(),
                Some(Step::Damaged {
                    off: 1008,
                    damage: Damage::NameLen,
                    ..
                })
            ),
            "{:?}",
            steps.last()
        );
    }

    #[test]
    fn a_short_area_is_truncated_and_an_empty_one_has_no_entries() {
        let b = block();
        // Four bytes after the first entry: not a header.
        let steps: Vec<_> = entries(&b[..16], 1024).collect();
        assert!(matches!(
            steps[1],
            Step::Damaged {
                off: 12,
                damage: Damage::Truncated,
                header: None
            }
        ));
        assert_eq!(entries(&[], 1024).count(), 0);
    }

    #[test]
    fn the_walk_is_bounded_on_garbage() {
        // All zeros: rec_len 0 is damage at once, never a loop.
        assert_eq!(entries(&[0u8; 4096], 4096).count(), 1);
        // Minimal 12-byte records throughout: one step per record, no more.
        let mut b = vec![0u8; 4096];
        for off in (0..4096).step_by(12).take_while(|o| o + 12 <= 4096) {
            put(&mut b, off, 1, 12, b"a", 1);
        }
        let n = entries(&b, 4096).count();
        assert!(n <= 4096 / 12 + 1, "{n} steps");
    }

    #[test]
    fn leaf_entries_stop_before_the_checksum_tail() {
        let mut b = block();
        // Shorten the last entry and add a tail.
        b[40 + 4..40 + 6].copy_from_slice(&((1024 - 40 - 12) as u16).to_le_bytes());
        put(&mut b, 1012, 0, 12, b"", 0);
        b[1012 + 7] = fdir::ft::CSUM_TAIL;
        assert_eq!(leaf_area(&b).len(), 1012);
        assert_eq!(leaf_entries(&b).good().count(), 4);
        // The whole block walks the tail as one more (empty) entry.
        assert_eq!(entries(&b, 1024).good().count(), 5);
        // Without the tail's marker, the area is the whole block.
        b[1012 + 7] = 0;
        assert_eq!(leaf_area(&b).len(), 1024);
    }
}

/// The name e2fsck gives an entry whose name clashes: `name` mutated (`mutate_name`) until it
/// is none of `taken` (at most 10,000 tries; the last try otherwise).
pub(crate) fn renamed(name: &[u8], taken: &std::collections::HashSet<Vec<u8>>) -> Vec<u8> {
    let mut new = name.to_vec();
    for _ in 0..10_000u32 {
        mutate_name(&mut new);
        if !taken.contains(&new) {
            break;
        }
    }
    new
}

/// The next name e2fsck tries for a clashing entry: `~0` put at the end (overwriting the last
/// characters when that keeps the length within the same 4-byte slot), then counted up
/// (`~1`, … `~9`, `~10` …).
pub(crate) fn mutate_name(name: &mut Vec<u8>) {
    let len = name.len();
    if len == 0 {
        name.extend_from_slice(b"~0");
        return;
    }
    let digits = name.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let tilde = digits > 0 && digits < len && name[len - digits - 1] == b'~';
    if !tilde {
        let grown = if (len - 1) % 4 < 2 {
            len + 2
        } else {
            (len + 3) & !3
        };
        let grown = grown.clamp(2, fdir::NAME_MAX);
        name.resize(grown, 0);
        name[grown - 2] = b'~';
        name[grown - 1] = b'0';
        return;
    }
    // Count up the digits; past all nines the number gains a digit in front of the tilde.
    for i in (len - digits..len).rev() {
        if name[i] == b'9' {
            name[i] = b'0';
        } else {
            name[i] += 1;
            return;
        }
    }
    // All nines: the character before the tilde moves on instead (as e2fsck does).
    match len - digits - 1 {
        1 => match name[0] {
            b'z' => name[0] = b'A',
            b'Z' => {
                name[0] = b'~';
                name[1] = b'0';
            }
            c => name[0] = c.wrapping_add(1),
        },
        0 => name[0] = b'a',
        at => {
            name[at] = b'1';
            name[at - 1] = b'~';
        }
    }
}

#[cfg(test)]
mod mutate_tests {
    use super::mutate_name as mutate;

    fn next(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        mutate(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn names_are_mutated_as_e2fsck_renames_them() {
        // 16 characters: the suffix replaces the last two.
        assert_eq!(next("modules.conf.old"), "modules.conf.o~0");
        // 6 characters ((6-1) % 4 = 1): the suffix is appended.
        assert_eq!(next("test-0"), "test-0~0");
        assert_eq!(next("abc"), "ab~0");
        assert_eq!(next("x~0"), "x~1");
        assert_eq!(next("x~9"), "y~0");
        assert_eq!(next("ab~99"), "a~100");
        assert_eq!(next("~9"), "a0");
    }
}
