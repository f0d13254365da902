//! Writes the in-process fuzzer's seed corpus (`scripts/fuzz.sh`): the built images of this
//! crate in both flavours and two sizes, and every image file named on the command line (made
//! by mke2fs in the script), each packed ([`ffsck_testfs::packed`]).
//!
//! Usage: `fuzz_seeds OUTDIR [IMAGE...]`.

use ffsck_testfs::{packed, Image, Options};
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let out = PathBuf::from(args.next().expect("usage: fuzz_seeds OUTDIR [IMAGE...]"));
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
