//! Whether a check without `-f` may be skipped, decided as e2fsck decides it: a file system
//! with errors, not cleanly unmounted, with stale backups, mounted too often or not checked
//! for too long is checked (and the reason said); any other gets e2fsck's "clean" line.
//!
//! A repair recovers a journal that needs it before deciding (`repair::prepare`, as e2fsck
//! does); a read-only run decides on the file system as it is on disk, as e2fsck's does.
//!
//! Not followed: e2fsck's deferral on battery power (`defer_check_on_battery`) and its
//! e2fsck.conf options; an orphan list to release (or a journal the repair could not recover
//! by itself) forces the check in a repair here, where e2fsck releases the orphans (or
//! replays the journal) first, then decides.

use ffsck_check::Findings;
use ffsck_check::{pass0, Mode, Policy, SuperHint};
use ffsck_format::superblock::{STATE_ERROR, STATE_VALID};
use ffsck_format::{Incompat, RoCompat};
use ffsck_io::Device;
use std::sync::Arc;

/// A clock earlier than 1 January 2010 is taken to be wrong: intervals are then not judged.
const SANE_CLOCK: i64 = 1_262_322_000;
/// How far in the future a last-check time may be before it counts as wrong (e2fsck's
/// default `accept_time_fudge`).
const TIME_FUDGE: i64 = 86_400;

/// The time the check stamps and judges by, in seconds since the epoch: `E2FSCK_TIME` when
/// set (as e2fsck reads it, in C's notation: decimal, `0x` hexadecimal or `0` octal), which
/// makes a repair reproducible; otherwise the system clock.
pub fn clock() -> i64 {
    std::env::var("E2FSCK_TIME")
        .ok()
        .and_then(|v| parse_c_number(v.trim()))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        })
}

/// An unsigned number as `strtoull(s, NULL, 0)` reads a whole string.
fn parse_c_number(s: &str) -> Option<i64> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    i64::try_from(u64::from_str_radix(digits, radix).ok()?).ok()
}

/// What to do without `-f`.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Print the line and exit 0.
    Skip(String),
    /// Check, after printing why when there is a line.
    Check(Option<String>),
}

/// The name `-N` gave: printed in place of the path and the label.
pub static NAME_OVERRIDE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The name e2fsck gives the file system in its messages: its label when it has one (spaces
/// and colons made underscores), else the device as given.
pub fn display_name(label: &str, dev_name: &str) -> String {
    if let Some(name) = NAME_OVERRIDE.get() {
        return name.clone();
    }
    if label.is_empty() {
        return dev_name.to_string();
    }
    label
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == ':' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Decide whether the file system on `dev` is checked, at time `now` (seconds since the
/// epoch), under `policy`.
pub fn decide(
    dev: Arc<dyn Device>,
    dev_name: &str,
    policy: Policy,
    journal_dev: Option<&Arc<dyn Device>>,
    now: i64,
) -> Decision {
    let mut found = Findings::default();
    // A file system that does not open from its primary superblock is checked; the check says why.
    let Ok(p0) = pass0::run_with(
        dev.clone(),
        SuperHint::default(),
        policy.with_mode(Mode::No),
        journal_dev,
        u64::try_from(now).unwrap_or(0),
        &mut found,
    ) else {
        return Decision::Check(None);
    };
    let sb = &p0.fs.sb;
    if p0.fs.sb_block != 0 {
        return Decision::Check(None);
    }
    let name = display_name(&sb.label(), dev_name);
    // A journal to replay or orphans to release: done (by the check) before anything else in
    // a repair. A read-only run, as e2fsck's, decides on the file system as it is on disk
    // (and says so of the journal, if it skips the check; a check replays it in memory).
    let recover = sb.incompat().has(Incompat::RECOVER);
    let orphans = sb.s_last_orphan.get() != 0
        || (sb.compat().has(ffsck_format::Compat::ORPHAN_FILE)
            && sb.ro_compat().has(RoCompat::ORPHAN_PRESENT));
    if policy.mode != Mode::No && (recover || orphans) {
        return Decision::Check(None);
    }

    let forced = |why: String| Decision::Check(Some(format!("{name}{why}, check forced.")));
    // What the superblock checks would fix is fixed, and then the whole file system checked;
    // what they leave unfixed makes it a file system with errors.
    let fixable = found.0.iter().any(|f| {
        let info = f.problem.info().flags;
        info & ffsck_check::problem::flag::INFO == 0 && policy.answer(f.problem)
    });
    if fixable {
        return Decision::Check(None);
    }
    let errors = found.0.iter().any(|f| policy.leaves_error(f));
    let state = sb.s_state.get();
    let broken_clock = now < SANE_CLOCK;
    let stored_lastcheck = i64::from(sb.s_lastcheck.get()) | (i64::from(sb.s_lastcheck_hi) << 32);
    let mut lastcheck = stored_lastcheck;
    if lastcheck > now {
        lastcheck -= TIME_FUDGE;
    }
    let mnt_count = u32::from(sb.s_mnt_count.get());
    let max_mnt = sb.s_max_mnt_count.get() as i16;
    let interval = i64::from(sb.s_checkinterval.get());
    if state & STATE_ERROR != 0 || errors {
        return forced(" contains a file system with errors".into());
    }
    if state & STATE_VALID == 0 {
        return forced(" was not cleanly unmounted".into());
    }
    // (e2fsck compares with the backups only when it may write.)
    if policy.mode != Mode::No && ffsck_check::backup_differs(&*dev, sb) {
        return forced(" primary superblock features different from backup".into());
    }
    if max_mnt > 0 && mnt_count >= max_mnt as u32 {
        return forced(format!(
            " has been mounted {mnt_count} times without being checked"
        ));
    }
    if !broken_clock && interval != 0 && now < lastcheck {
        return forced(" has filesystem last checked time in the future".into());
    }
    if !broken_clock && interval != 0 && now - lastcheck >= interval {
        let days = (now - stored_lastcheck) / 86_400;
        return forced(format!(" has gone {days} days without being checked"));
    }
    let mut line = String::new();
    if recover && sb.compat().has(ffsck_format::Compat::HAS_JOURNAL) {
        line += "Warning: skipping journal recovery because doing a read-only filesystem check.\n";
    }
    if broken_clock && interval != 0 {
        line += &format!("{name}: ignoring check interval, broken_system_clock set\n");
    }
    // The counts as the descriptors have them (the kernel does not keep the superblock's up
    // to date); e2fsck writes them back unless under -n, which keeps the superblock's.
    let geo = &p0.fs.geo;
    let (free_inodes, free_blocks) = if policy.mode == Mode::No {
        (
            u64::from(sb.s_free_inodes_count.get()),
            sb.free_blocks_count(),
        )
    } else {
        p0.fs.groups.iter().fold((0u64, 0u64), |(i, b), g| {
            (
                i + u64::from(g.free_inodes_count()),
                b + u64::from(g.free_blocks_count()) * u64::from(geo.cluster_ratio),
            )
        })
    };
    let inodes = u64::from(sb.s_inodes_count.get());
    let blocks = sb.blocks_count();
    line += &format!(
        "{name}: clean, {}/{inodes} files, {}/{blocks} blocks",
        inodes.wrapping_sub(free_inodes) & 0xFFFF_FFFF,
        blocks.wrapping_sub(free_blocks)
    );
    let mut next_check: i64 = 100_000;
    if max_mnt > 0 {
        next_check = (i64::from(max_mnt) - i64::from(mnt_count)).max(1);
    }
    if !broken_clock && interval != 0 && now - stored_lastcheck >= interval {
        next_check = 1;
    }
    if next_check == 1 {
        line += " (check after next mount)";
    } else if next_check <= 5 {
        line += &format!(" (check in {next_check} mounts)");
    }
    Decision::Skip(line)
}

#[cfg(test)]
mod tests {
    use super::parse_c_number;

    #[test]
    fn e2fsck_time_reads_as_strtoull_does() {
        assert_eq!(parse_c_number("1700000000"), Some(1_700_000_000));
        assert_eq!(parse_c_number("0x10"), Some(16));
        assert_eq!(parse_c_number("010"), Some(8));
        assert_eq!(parse_c_number("0"), Some(0));
        assert_eq!(parse_c_number("12abc"), None);
        assert_eq!(parse_c_number(""), None);
    }
}
