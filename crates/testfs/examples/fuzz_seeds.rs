//! Writes the in-process fuzzer's seed corpus (`scripts/fuzz.sh`): the built images of this
//! crate in both flavours and two sizes, and every image file named on the command line (made
//! by mke2fs in the script), each packed ([`ffsck_testfs::packed`]).
//!
//! Usage: `fuzz_seeds OUTDIR [IMAGE...]`; `fuzz_seeds --unpack INPUT IMAGE` writes the image
//! a fuzzer input stands for (to run `ffsck` or `e2fsck` on a crash's input).

use ffsck_testfs::{packed, Image, Options};
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let usage = "usage: fuzz_seeds OUTDIR [IMAGE...] | fuzz_seeds --unpack INPUT IMAGE";
    let out = PathBuf::from(args.next().expect(usage));
    if out.as_os_str() == "--unpack" {
        let (input, image) = (args.next().expect(usage), args.next().expect(usage));
        // The fuzz target's cap (fuzz/fuzz_targets/check_repair.rs).
        let img = packed::unpack(&std::fs::read(input)?, 4 << 20);
        return std::fs::write(image, img);
    }
    std::fs::create_dir_all(&out)?;
    for (name, opts) in [
        ("testfs-ext2", Options::ext2()),
        ("testfs-ext4", Options::ext4()),
    ] {
        for blocks in [128, 2048] {
            let img = Image::build(Options {
                blocks: Some(blocks),
                ..opts
            })
            .finish();
            write(&out, &format!("{name}-{blocks}"), &img)?;
        }
    }
    for path in args {
        let img = std::fs::read(&path)?;
        let name = Path::new(&path)
            .file_name()
            .map_or("image".into(), |n| n.to_string_lossy().into_owned());
        write(&out, &name, &img)?;
    }
    Ok(())
}

fn write(dir: &Path, name: &str, img: &[u8]) -> std::io::Result<()> {
    let p = packed::pack(img);
    println!(
        "{name}: {} KiB image, {} KiB packed",
        img.len() / 1024,
        p.len() / 1024
    );
    std::fs::write(dir.join(name), p)
}
