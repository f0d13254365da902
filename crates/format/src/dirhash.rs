//! Directory-index name hashes: the legacy hash, half-MD4 and TEA, in their signed and
//! unsigned-`char` variants, as the htree format defines them.
//!
//! Indexed directories sort entries by a 31-bit hash of the name (the low bit is reserved as a
//! collision marker in the index). The "signed" variants exist because the original code
//! hashed C `char`, whose signedness differs between architectures; `s_flags` records which
//! one the file system was created with. SipHash (casefolded + encrypted directories) stores
//! the hash in the entry itself, so it is not computed here.

use crate::dir::hash;

/// Why a name could not be hashed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashError {
    /// The version is unknown or keeps its hash in the entry (SipHash).
    Unsupported(u8),
}

/// Initial state shared by half-MD4 and TEA when the file system has no hash seed.
const DEFAULT_STATE: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// Hash `name` with `version` (already adjusted for the unsigned flag: 3..=5 are the unsigned
/// forms of 0..=2) and the superblock's `s_hash_seed`. Returns the major hash with bit 0 clear.
pub fn name_hash(version: u8, name: &[u8], seed: &[u32; 4]) -> Result<u32, HashError> {
    name_hashes(version, name, seed).map(|(major, _)| major)
}

/// The major hash (bit 0 clear) and the minor hash of `name`, as [`name_hash`]. An index
/// orders entries of equal major hash by the minor one (the legacy hash has none: 0).
pub fn name_hashes(version: u8, name: &[u8], seed: &[u32; 4]) -> Result<(u32, u32), HashError> {
    let mut state = if seed.iter().all(|&w| w == 0) {
        DEFAULT_STATE
    } else {
        *seed
    };
    let (h, minor) = match version {
        hash::LEGACY | hash::LEGACY_UNSIGNED => (legacy(name, version == hash::LEGACY_UNSIGNED), 0),
        hash::HALF_MD4 | hash::HALF_MD4_UNSIGNED => {
            let unsigned = version == hash::HALF_MD4_UNSIGNED;
            // One round per 32 bytes; each round packs the remaining length into its pad.
            for start in (0..name.len()).step_by(32) {
                let rest = &name[start..];
                half_md4_round(&mut state, &pack_words::<8>(rest, rest.len(), unsigned));
            }
            (state[1], state[2])
        }
        hash::TEA | hash::TEA_UNSIGNED => {
            let unsigned = version == hash::TEA_UNSIGNED;
            for start in (0..name.len()).step_by(16) {
                let rest = &name[start..];
                tea_round(&mut state, &pack_words::<4>(rest, rest.len(), unsigned));
            }
            (state[0], state[1])
        }
        v => return Err(HashError::Unsupported(v)),
    };
    Ok((h & !1, minor))
}

/// A byte as the original C code saw it: sign-extended when `char` is signed.
fn widen(b: u8, unsigned: bool) -> u32 {
    if unsigned {
        u32::from(b)
    } else {
        i32::from(b as i8) as u32
    }
}

/// The legacy ("dx_hack") hash: a simple multiplicative mix kept within 31 bits.
fn legacy(name: &[u8], unsigned: bool) -> u32 {
    let (mut h0, mut h1): (u32, u32) = (0x12a3_fe2d, 0x37ab_e8f9);
    for &b in name {
        let mut h = h1.wrapping_add(h0 ^ widen(b, unsigned).wrapping_mul(7_152_373));
        if h & 0x8000_0000 != 0 {
            h = h.wrapping_sub(0x7fff_ffff);
        }
        h1 = h0;
        h0 = h;
    }
    h0 << 1
}

/// Pack up to `N * 4` bytes of `msg` big-end-first into `N` words; unused words (and the
/// start value of each word) are filled with a pad derived from the remaining length `len`.
fn pack_words<const N: usize>(msg: &[u8], len: usize, unsigned: bool) -> [u32; N] {
    let len32 = len as u32;
    let mut pad = len32 | (len32 << 8);
    pad |= pad << 16;
    let mut out = [pad; N];
    let take = len.min(N * 4).min(msg.len());
    let mut val = pad;
    let mut w = 0;
    for (i, &b) in msg[..take].iter().enumerate() {
        val = widen(b, unsigned).wrapping_add(val << 8);
        if i % 4 == 3 {
            out[w] = val;
            w += 1;
            val = pad;
        }
    }
    if w < N {
        out[w] = val;
    }
    out
}

/// One TEA mixing step (16 cycles) folded into the first two state words.
fn tea_round(state: &mut [u32; 4], input: &[u32; 4]) {
    const DELTA: u32 = 0x9E37_79B9;
    let (mut b0, mut b1) = (state[0], state[1]);
    let [a, b, c, d] = *input;
    let mut sum: u32 = 0;
    for _ in 0..16 {
        sum = sum.wrapping_add(DELTA);
        b0 = b0.wrapping_add(
            (b1 << 4).wrapping_add(a) ^ b1.wrapping_add(sum) ^ (b1 >> 5).wrapping_add(b),
        );
        b1 = b1.wrapping_add(
            (b0 << 4).wrapping_add(c) ^ b0.wrapping_add(sum) ^ (b0 >> 5).wrapping_add(d),
        );
    }
    state[0] = state[0].wrapping_add(b0);
    state[1] = state[1].wrapping_add(b1);
}

/// The reduced MD4 compression (three rounds of eight steps) used by the htree hash.
fn half_md4_round(state: &mut [u32; 4], x: &[u32; 8]) {
    const K2: u32 = 0x5A82_7999;
    const K3: u32 = 0x6ED9_EBA1;
    let f = |x: u32, y: u32, z: u32| z ^ (x & (y ^ z));
    let g = |x: u32, y: u32, z: u32| (x & y).wrapping_add((x ^ y) & z);
    let h = |x: u32, y: u32, z: u32| x ^ y ^ z;
    let [mut a, mut b, mut c, mut d] = *state;
    // Each step: v = rotl(v + fun(p, q, r) + word, shift), rotating the roles of a..d.
    fn step(fun: fn(u32, u32, u32) -> u32, v: u32, p: u32, q: u32, r: u32, w: u32, s: u32) -> u32 {
        v.wrapping_add(fun(p, q, r)).wrapping_add(w).rotate_left(s)
    }
    for (i, s) in [
        (0, 3),
        (1, 7),
        (2, 11),
        (3, 19),
        (4, 3),
        (5, 7),
        (6, 11),
        (7, 19),
    ]
    .iter()
    .enumerate()
    {
        let w = x[s.0];
        match i % 4 {
            0 => a = step(f, a, b, c, d, w, s.1),
            1 => d = step(f, d, a, b, c, w, s.1),
            2 => c = step(f, c, d, a, b, w, s.1),
            _ => b = step(f, b, c, d, a, w, s.1),
        }
    }
    for (i, s) in [
        (1, 3),
        (3, 5),
        (5, 9),
        (7, 13),
        (0, 3),
        (2, 5),
        (4, 9),
        (6, 13),
    ]
    .iter()
    .enumerate()
    {
        let w = x[s.0].wrapping_add(K2);
        match i % 4 {
            0 => a = step(g, a, b, c, d, w, s.1),
            1 => d = step(g, d, a, b, c, w, s.1),
            2 => c = step(g, c, d, a, b, w, s.1),
            _ => b = step(g, b, c, d, a, w, s.1),
        }
    }
    for (i, s) in [
        (3, 3),
        (7, 9),
        (2, 11),
        (6, 15),
        (1, 3),
        (5, 9),
        (0, 11),
        (4, 15),
    ]
    .iter()
    .enumerate()
    {
        let w = x[s.0].wrapping_add(K3);
        match i % 4 {
            0 => a = step(h, a, b, c, d, w, s.1),
            1 => d = step(h, d, a, b, c, w, s.1),
            2 => c = step(h, c, d, a, b, w, s.1),
            _ => b = step(h, b, c, d, a, w, s.1),
        }
    }
    state[0] = state[0].wrapping_add(a);
    state[1] = state[1].wrapping_add(b);
    state[2] = state[2].wrapping_add(c);
    state[3] = state[3].wrapping_add(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values from `debugfs -R "dx_hash -h ALG NAME"` (e2fsprogs 1.47).
    #[test]
    fn matches_reference_values() {
        let long = b"entry-with-a-rather-long-name-023-and-some-more-bytes-beyond-32";
        let cases: [(u8, &[u8], u32); 9] = [
            (hash::LEGACY, b"a", 0xe74b53e2),
            (hash::LEGACY, b"lost+found", 0x5e2aba24),
            (hash::LEGACY, long, 0xdec4fd4a),
            (hash::HALF_MD4, b"a", 0xd5fa7d7a),
            (hash::HALF_MD4, b"lost+found", 0x591de422),
            (hash::HALF_MD4, long, 0xc8ba6bb6),
            (hash::TEA, b"a", 0x6d0ea4c0),
            (hash::TEA, b"lost+found", 0x2dbf9e80),
            (hash::TEA, long, 0xc13e3b96),
        ];
        for (v, name, want) in cases {
            assert_eq!(
                name_hash(v, name, &[0; 4]),
                Ok(want),
                "version {v}, name {:?}",
                String::from_utf8_lossy(name)
            );
        }
        // With a seed (UUID 01234567-89ab-cdef-0123-456789abcdef as little-endian words).
        let seed = [0x6745_2301, 0xefcd_ab89, 0x6745_2301, 0xefcd_ab89];
        assert_eq!(name_hash(hash::HALF_MD4, b"hello", &seed), Ok(0xa26e4a80));
    }

    /// Minor hashes from `debugfs -R "dx_hash -h ALG lost+found"` (e2fsprogs 1.47).
    #[test]
    fn minor_hashes_match_debugfs() {
        let cases = [
            (hash::LEGACY, (0x5e2aba24, 0)),
            (hash::HALF_MD4, (0x591de422, 0x6ffc56e0)),
            (hash::TEA, (0x2dbf9e80, 0xbfebee4f)),
        ];
        for (v, want) in cases {
            assert_eq!(
                name_hashes(v, b"lost+found", &[0; 4]),
                Ok(want),
                "version {v}"
            );
        }
    }

    #[test]
    fn unsupported_version_is_an_error() {
        assert_eq!(
            name_hash(hash::SIPHASH, b"x", &[0; 4]),
            Err(HashError::Unsupported(hash::SIPHASH))
        );
    }

    #[test]
    fn low_bit_is_always_clear() {
        for v in 0..=5 {
            for n in [&b"a"[..], b"lost+found", &[0xffu8; 40][..]] {
                assert_eq!(name_hash(v, n, &[0; 4]).unwrap() & 1, 0);
            }
        }
    }

    #[test]
    fn signedness_only_matters_for_high_bytes() {
        for (s, u) in [(0, 3), (1, 4), (2, 5)] {
            assert_eq!(
                name_hash(s, b"plain", &[1, 2, 3, 4]),
                name_hash(u, b"plain", &[1, 2, 3, 4])
            );
            assert_ne!(
                name_hash(s, "é".as_bytes(), &[1, 2, 3, 4]),
                name_hash(u, "é".as_bytes(), &[1, 2, 3, 4])
            );
        }
    }
}
