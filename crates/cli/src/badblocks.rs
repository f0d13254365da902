//! `-l FILE`, `-L FILE` and `-c`: the bad-block list a repair first puts into the bad-blocks
//! inode, read as e2fsck reads it: one block number at the start of each line (other lines
//! skipped), from the file or from `badblocks(8)` run read-only (`-cc`: its non-destructive
//! read-write test) over the file system's blocks. `-L` and `-c` without `-k` replace the
//! inode's list; `-l` and `-kc` add to it. The check crate drops the numbers outside the file
//! system with e2fsck's warning (`repair::bblist`).

use crate::args::Args;
use ffsck_check::{exit, BadBlockList};
use ffsck_format::RawSuperblock;
use ffsck_io::Device;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

/// The numbers of a bad-block list: the leading number of each line, as `sscanf("%llu")`
/// reads it; a number past 32 bits is refused, as libext2fs refuses it.
fn parse(text: impl BufRead) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.map_err(|e| e.to_string())?;
        let digits: String = line
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() {
            continue;
        }
        match digits.parse::<u64>() {
            Ok(b) if b >> 32 == 0 => out.push(b),
            _ => return Err("Value too large for defined data type".into()),
        }
    }
    Ok(out)
}

/// The list the command line asks for, or `None` without `-l`, `-L` or `-c`. An error is
/// e2fsck's message and exit code.
pub fn list(
    args: &Args,
    device: &Path,
    dev: &dyn Device,
    preen: bool,
    dev_name: &str,
) -> Result<Option<BadBlockList>, (String, i32)> {
    let fatal = |what: String| (what, exit::ERROR);
    let (blocks, replace) = match (&args.add_badblocks, &args.set_badblocks) {
        (Some(file), _) | (None, Some(file)) => {
            let f = std::fs::File::open(file).map_err(|e| {
                fatal(format!(
                    "{} while trying to open {}",
                    crate::device::strerror(&e),
                    file.display()
                ))
            })?;
            let blocks = parse(std::io::BufReader::new(f))
                .map_err(|e| fatal(format!("{e} while reading in list of bad blocks from file")))?;
            (blocks, args.add_badblocks.is_none())
        }
        _ if args.badblocks_scan > 0 => (scan(args, device, dev, preen)?, !args.keep_badblocks),
        _ => return Ok(None),
    };
    Ok(Some(BadBlockList {
        blocks,
        replace,
        device: dev_name.to_string(),
    }))
}

/// `badblocks -b BLOCKSIZE -X [-s] [-n] DEVICE LAST`, as e2fsck runs it: the blocks it lists.
fn scan(
    args: &Args,
    device: &Path,
    dev: &dyn Device,
    preen: bool,
) -> Result<Vec<u64>, (String, i32)> {
    let fatal = |what: String| (what, exit::ERROR);
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, 1024)
        .map_err(|e| fatal(format!("{e} while reading the superblock")))?;
    let sb = RawSuperblock::parse(&raw)
        .ok_or_else(|| fatal("the superblock could not be read".into()))?;
    let log = sb.s_log_block_size.get();
    if log > 6 {
        return Err(fatal("the superblock's block size is invalid".into()));
    }
    let bs = 1024u64 << log;
    let count = sb.blocks_count();
    let mut cmd = Command::new("badblocks");
    cmd.arg("-b").arg(bs.to_string()).arg("-X");
    if !preen {
        cmd.arg("-s");
    }
    if args.badblocks_scan > 1 {
        cmd.arg("-n");
    }
    let out = cmd
        .arg(device)
        .arg(count.saturating_sub(1).to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| fatal(format!("{e} while trying to run 'badblocks'")))?;
    if !out.status.success() {
        return Err(fatal(
            "badblocks failed while reading in list of bad blocks".into(),
        ));
    }
    parse(&out.stdout[..]).map_err(|e| fatal(format!("{e} while reading in list of bad blocks")))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn lines_are_read_as_e2fsck_reads_them() {
        let text = "12\n  40 trailing words\n\nnot a number\n7\n12\n";
        assert_eq!(parse(text.as_bytes()).unwrap(), vec![12, 40, 7, 12]);
        assert!(parse("4294967296\n".as_bytes()).is_err());
    }
}
