//! The two checksum algorithms of ext4: crc32c in the kernel's un-inverted form, and the crc16
//! that `uninit_bg` uses for group descriptors.
//!
//! The kernel's `ext4_chksum(seed, data)` is a raw crc32c update with neither pre- nor
//! post-inversion; the `crc32c` crate computes the standard (inverted) form with the CPU's
//! crc32 instruction, so we convert at the boundary. Whole blocks (directory, extent, bitmap
//! and inode-table blocks are most of what a check reads) go to `crc-fast` instead, which
//! folds with carry-less multiplication (VPCLMULQDQ where the CPU has it) at about twice the
//! speed on 4 KiB; its per-call setup makes it the slower of the two on short inputs.

/// Inputs from this length up are checksummed with `crc-fast`.
const FOLD_MIN: usize = 1024;

/// `ext4_chksum`: raw crc32c update of `seed` with `data`.
#[inline]
pub fn ext4_crc32c(seed: u32, data: &[u8]) -> u32 {
    if data.len() >= FOLD_MIN {
        // The digest's state is the raw register; `finalize` inverts it.
        let mut d = crc_fast::Digest::new_with_init_state(
            crc_fast::CrcAlgorithm::Crc32Iscsi,
            u64::from(seed),
        );
        d.update(data);
        !(d.finalize() as u32)
    } else {
        !crc32c::crc32c_append(!seed, data)
    }
}

/// `ext4_crc32c(seed, d)` for each of three inputs of one length, computed side by side. The
/// CPU's crc32 instruction takes three cycles to give its result but can start one every
/// cycle, so one short input (an inode) leaves it idle two cycles in three, which three
/// independent inputs fill. Inputs of different lengths are taken one by one.
pub fn ext4_crc32c_x3(seed: u32, data: [&[u8]; 3]) -> [u32; 3] {
    #[cfg(target_arch = "x86_64")]
    {
        let len = data[0].len();
        if data[1].len() == len
            && data[2].len() == len
            && len < FOLD_MIN
            && std::arch::is_x86_feature_detected!("sse4.2")
        {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has SSE4.2, the only feature the function is compiled for.
            return unsafe { crc32c_x3_sse42(seed, data) };
        }
    }
    data.map(|d| ext4_crc32c(seed, d))
}

/// The three-way loop of `ext4_crc32c_x3`; the inputs have one length.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_x3_sse42(seed: u32, [a, b, c]: [&[u8]; 3]) -> [u32; 3] {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |w: &[u8]| u64::from_le_bytes(w.try_into().unwrap_or_default());
    let (mut x, mut y, mut z) = (u64::from(seed), u64::from(seed), u64::from(seed));
    let (wa, wb, wc) = (a.chunks_exact(8), b.chunks_exact(8), c.chunks_exact(8));
    let (ra, rb, rc) = (wa.remainder(), wb.remainder(), wc.remainder());
    for ((p, q), r) in wa.zip(wb).zip(wc) {
        x = _mm_crc32_u64(x, word(p));
        y = _mm_crc32_u64(y, word(q));
        z = _mm_crc32_u64(z, word(r));
    }
    let (mut x, mut y, mut z) = (x as u32, y as u32, z as u32);
    for ((&p, &q), &r) in ra.iter().zip(rb).zip(rc) {
        x = _mm_crc32_u8(x, p);
        y = _mm_crc32_u8(y, q);
        z = _mm_crc32_u8(z, r);
    }
    [x, y, z]
}

/// Seed for the checksums of one inode's metadata (inode, extent blocks, directory blocks).
pub fn inode_seed(fs_seed: u32, ino: u32, generation: u32) -> u32 {
    let s = ext4_crc32c(fs_seed, &ino.to_le_bytes());
    ext4_crc32c(s, &generation.to_le_bytes())
}

/// crc16 with the polynomial 0x8005, reflected, no final xor (ext2fs_crc16, CRC-16/MODBUS
/// when started at 0xFFFF); `crc` is the running value so callers can chain fields.
pub fn crc16(crc: u16, data: &[u8]) -> u16 {
    static CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_MODBUS);
    // The crc crate bit-reverses the initial value of reflected algorithms; undo that so a
    // running value can be passed back in to chain fields.
    let mut d = CRC16.digest_with_initial(crc.reverse_bits());
    d.update(data);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn crc32c_matches_standard_vector() {
        // Standard CRC-32C of "123456789" is 0xE3069283; the kernel form is its complement.
        assert_eq!(ext4_crc32c(!0, b"123456789"), !0xE306_9283);
    }
    #[test]
    fn crc32c_long_inputs_chain_like_short_ones() {
        // Both implementations are in use (by length): a long input must give what the same
        // bytes fed in short pieces give, from any seed.
        let data: Vec<u8> = (0..9000u32).map(|i| (i * 31 + i / 7) as u8).collect();
        for (seed, len) in [(!0u32, 1024), (0x1234_5678, 4096), (0, 5000), (7, 9000)] {
            let whole = ext4_crc32c(seed, &data[..len]);
            let pieces = data[..len].chunks(FOLD_MIN - 1).fold(seed, ext4_crc32c);
            assert_eq!(whole, pieces, "seed {seed:#x}, {len} bytes");
        }
        assert_eq!(ext4_crc32c(!0, &[0u8; 4096]), !crc32c::crc32c(&[0u8; 4096]));
    }
    #[test]
    fn three_way_crc32c_equals_three_single_ones() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 131 + i / 5) as u8).collect();
        for len in [0, 1, 7, 8, 9, 136, 264, 520, 1023, 1024, 1500] {
            for seed in [0u32, !0, 0xDEAD_BEEF] {
                let parts = [&data[..len], &data[700..700 + len], &data[1400..1400 + len]];
                let want = parts.map(|p| ext4_crc32c(seed, p));
                assert_eq!(
                    ext4_crc32c_x3(seed, parts),
                    want,
                    "len {len} seed {seed:#x}"
                );
            }
        }
        // Different lengths are taken one by one.
        let parts = [&data[..10], &data[..20], &data[..30]];
        assert_eq!(ext4_crc32c_x3(5, parts), parts.map(|p| ext4_crc32c(5, p)));
    }
    #[test]
    fn crc16_matches_standard_vector() {
        // CRC-16/MODBUS ("123456789") = 0x4B37: init 0xFFFF, reflected 0x8005, no xorout.
        assert_eq!(crc16(0xFFFF, b"123456789"), 0x4B37);
    }
    #[test]
    fn crc16_chains() {
        // Feeding the data in two parts must give the same value as in one.
        assert_eq!(crc16(crc16(0xFFFF, b"1234"), b"56789"), 0x4B37);
    }
}
