//! The run's clock: the one time a check and its repair read, given by the caller.
//!
//! The check never reads the system clock (`clippy.toml` forbids it): the cli reads it once and
//! passes it in `CheckOptions::now`, and every pass and repair takes the time from the
//! [`Clock`] made of it, so a test or a replay injects a fixed time and gets the same stamps.

/// Seconds since the epoch, or no clock at all (0, as is a clock set before the epoch: the
/// checks that compare against the time are then skipped, as e2fsck skips them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clock(u64);

impl Clock {
    /// No clock.
    pub const NONE: Clock = Clock(0);

    /// The clock at `secs` seconds since the epoch (a time before it is no clock).
    pub fn at(secs: i64) -> Clock {
        Clock(u64::try_from(secs).unwrap_or(0))
    }

    /// Seconds since the epoch (0 for no clock).
    pub fn secs(self) -> u64 {
        self.0
    }

    /// Whether there is a clock to compare against.
    pub fn is_set(self) -> bool {
        self.0 != 0
    }

    /// The time as a 32-bit on-disk time field (`i_dtime`, `s_lastcheck`, ...) stores it: its
    /// low 32 bits.
    pub fn stamp(self) -> u32 {
        self.0 as u32
    }
}

impl From<u64> for Clock {
    fn from(secs: u64) -> Clock {
        Clock(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn a_time_before_the_epoch_is_no_clock() {
        assert_eq!(Clock::at(-5), Clock::NONE);
        assert!(!Clock::at(-5).is_set());
        assert!(Clock::at(1).is_set());
    }

    #[test]
    fn stamps_keep_the_low_32_bits() {
        let c = Clock::at(1_700_000_000);
        assert_eq!((c.secs(), c.stamp()), (1_700_000_000, 1_700_000_000));
        assert_eq!(Clock::from((1u64 << 32) + 7).stamp(), 7);
    }
}
