//! Helpers shared by the ffsck-check integration tests: the rule for a test that cannot run.

/// Say why the calling test is skipped (its "SKIPPED: ..." line). Under `REQUIRE_TOOLS=1`,
/// which scripts/test.sh (so CI) sets, that is a failure instead, with the same message: CI
/// has every tool (scripts/ensure-tools.sh) and runs as root.
pub fn skip(msg: &str) {
    if std::env::var_os("REQUIRE_TOOLS").is_some_and(|v| v == "1") {
        panic!("{msg} (REQUIRE_TOOLS=1)");
    }
    eprintln!("{msg}");
}
