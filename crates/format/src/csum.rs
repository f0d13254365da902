//! The two checksum algorithms of ext4: crc32c in the kernel's un-inverted form, and the crc16
//! that `uninit_bg` uses for group descriptors.
//!
//! The kernel's `ext4_chksum(seed, data)` is a raw crc32c update with neither pre- nor
//! post-inversion; the `crc32c` crate computes the standard (inverted) form with a hardware
//! instruction where the CPU has one, so we convert at the boundary.

/// `ext4_chksum`: raw crc32c update of `seed` with `data`.
#[inline]
pub fn ext4_crc32c(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
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
