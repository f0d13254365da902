//! The in-process fuzzer's input format (`fuzz/`): an image with its runs of zero KiB
//! compressed, so a mke2fs image of a few MiB (most of it an empty journal and free blocks) is
//! a seed of a few tens of KiB that libFuzzer can hold by the thousand and mutate where the
//! metadata is.
//!
//! The input is read in 1 KiB chunks. A chunk that starts with [`MARK`] stands for as many
//! zero KiB as the little-endian `u32` after the mark says; any other chunk (and a short last
//! one) is copied as it is. [`unpack`] stops at a size cap, so a mutated count cannot make an
//! image bigger than the fuzzer's memory bound.

/// The chunk size, and the unit of a zero run.
pub const KIB: usize = 1024;
/// The start of a chunk standing for a run of zero KiB.
pub const MARK: &[u8; 8] = b"\0ZEROS\0\0";

/// `image` with every run of at least two zero KiB (aligned to 1 KiB) as one run chunk.
pub fn pack(image: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunks = image.chunks(KIB).peekable();
    while let Some(c) = chunks.next() {
        if c.len() == KIB && c.iter().all(|&b| b == 0) {
            let mut n: u32 = 1;
            while let Some(next) = chunks.peek() {
                if n == u32::MAX || next.len() != KIB || next.iter().any(|&b| b != 0) {
                    break;
                }
                chunks.next();
                n += 1;
            }
            if n == 1 {
                out.extend_from_slice(c);
            } else {
                let mut run = [0u8; KIB];
                run[..8].copy_from_slice(MARK);
                run[8..12].copy_from_slice(&n.to_le_bytes());
                out.extend_from_slice(&run);
            }
        } else {
            out.extend_from_slice(c);
        }
    }
    out
}

/// The image `input` stands for, cut at `cap` bytes.
pub fn unpack(input: &[u8], cap: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len().min(cap));
    for c in input.chunks(KIB) {
        if out.len() >= cap {
            break;
        }
        if c.len() >= 12 && c[..8] == MARK[..] {
            let n = u32::from_le_bytes([c[8], c[9], c[10], c[11]]) as usize;
            let len = n.saturating_mul(KIB).min(cap - out.len());
            out.resize(out.len() + len, 0);
        } else {
            let len = c.len().min(cap - out.len());
            out.extend_from_slice(&c[..len]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut img = vec![0u8; 64 * KIB + 100];
        img[5 * KIB + 3] = 7;
        img[40 * KIB] = 1;
        img[64 * KIB + 99] = 9;
        let p = pack(&img);
        assert!(p.len() < 8 * KIB, "packed to {} bytes", p.len());
        assert_eq!(unpack(&p, usize::MAX), img);
    }

    #[test]
    fn cap_bounds_a_huge_run() {
        let mut run = vec![0u8; KIB];
        run[..8].copy_from_slice(MARK);
        run[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let input = [run.clone(), run, vec![1; 10]].concat();
        assert_eq!(unpack(&input, 3 * KIB + 5).len(), 3 * KIB + 5);
    }
}
