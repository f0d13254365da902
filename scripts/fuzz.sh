#!/usr/bin/env bash
# The in-process fuzzer (fuzz/fuzz_targets/check_repair.rs): libFuzzer runs the check, the
# repair into the overlay and a check of the result on mutated in-memory images.
#
#   scripts/fuzz.sh [SECONDS] [LIBFUZZER ARGS...]
#
# builds the target (libfuzzer-sys with sanitizer-coverage, no cargo-fuzz needed), writes the
# seed corpus (fuzz/seeds: the in-memory builder's images and small mke2fs -d images, packed;
# nothing is committed) and fuzzes for SECONDS (default 90) with the corpus in fuzz/corpus
# (kept between runs) and crashes in fuzz/artifacts. CI (scripts/test.sh) runs the default;
# a long run by hand: `nice -n 19 scripts/fuzz.sh 7200`. Replay one input:
# `fuzz/target/HOST/release/check_repair fuzz/artifacts/crash-...` (HOST: the host triple).
# FUZZ_CHECKS=1 adds overflow checks. docs/EXPERIMENTS.md has the rest.
# Each input is bounded: -timeout (seconds per input), -rss_limit_mb, the image size cap and
# the allocation cap in the target.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-90}
shift || true
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"
# libFuzzer is C++: the build needs a C++ compiler.
if ! command -v c++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
  else
    echo "a C++ compiler (g++) is required to build libFuzzer" >&2
    exit 1
  fi
fi
# The seeds: the builder's images (the example packs them) and mke2fs -d images of a small tree.
# (scripts/test.sh has sourced build-env.sh already: sourcing it twice would change the flags.)
[ -n "${CARGO_BUILD_TARGET:-}" ] || source scripts/build-env.sh
cargo build --release -q -p ffsck-testfs --example fuzz_seeds
seeder="target/$CARGO_BUILD_TARGET/release/examples/fuzz_seeds"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree/dir/sub"
printf 'hello\n' >"$tmp/tree/small"
head -c 5000 /dev/zero | tr '\0' 'x' >"$tmp/tree/dir/medium"
# Sparse: data at 20 KiB and 300 KiB needs an indirect and a double-indirect block (or an
# extent tree with holes) but few data blocks, so the packed seed stays small.
for off in 20 300; do printf 'data' | dd of="$tmp/tree/dir/sub/large" bs=1024 seek=$off conv=notrunc status=none; done
for i in $(seq 1 40); do : >"$tmp/tree/dir/f$i"; done
ln -s small "$tmp/tree/link"
ln -s "$(printf 'long/%.0s' $(seq 1 20))target" "$tmp/tree/dir/longlink"
ln "$tmp/tree/small" "$tmp/tree/dir/hard"
mkfifo "$tmp/tree/fifo"
imgs=()
mk() { # NAME SIZE MKE2FS_ARGS...
  local name=$1 size=$2
  shift 2
  mke2fs -q -F -N 64 -E root_owner=0:0 -d "$tmp/tree" "$@" "$tmp/$name" "$size" >/dev/null 2>&1 &&
    imgs+=("$tmp/$name") || echo "mke2fs $name $* failed: seed skipped" >&2
}
mk mkfs-ext2 512k -b 1024 -t ext2
mk mkfs-ext3 2m -b 1024 -t ext3
mk mkfs-ext4 2m -b 1024 -t ext4
mk mkfs-ext4-nojournal 512k -b 1024 -t ext4 -O ^has_journal
mk mkfs-ext4-inline 512k -b 1024 -t ext4 -O ^has_journal,inline_data -I 256
mk mkfs-ext4-64bit 1m -b 1024 -t ext4 -O ^has_journal,64bit,^resize_inode -g 256 -I 128
mk mkfs-ext4-orphanfile 2m -b 1024 -t ext4 -O orphan_file,^metadata_csum -I 1024
mk mkfs-ext4-xattr-htree 512k -b 1024 -t ext4 -O ^has_journal,ea_inode,project,quota -I 256
mk mkfs-ext4-4k 2m -b 4096 -t ext4 -O ^has_journal
mk mkfs-ext4-4k-journal 4m -b 4096 -t ext4
mk mkfs-ext4-64k 4m -b 65536 -t ext4 -O ^has_journal
mk mkfs-ext4-bigalloc 1m -b 1024 -t ext4 -O ^has_journal,bigalloc -C 4096
mk mkfs-ext4-encrypt 512k -b 1024 -t ext4 -O ^has_journal,encrypt
mk mkfs-ext4-mmp 512k -b 1024 -t ext4 -O ^has_journal,mmp
# casefold: /dir gets the casefold flag, and e2fsck -D rehashes it.
mk mkfs-ext4-casefold 512k -b 1024 -t ext4 -O ^has_journal,casefold
if [ -f "$tmp/mkfs-ext4-casefold" ]; then
  debugfs -w -R "set_inode_field /dir flags 0x40080000" "$tmp/mkfs-ext4-casefold" >/dev/null 2>&1 || true
  e2fsck -fyD "$tmp/mkfs-ext4-casefold" >/dev/null 2>&1 || true
fi
# A journal that needs recovery (debugfs writes a transaction and leaves it unreplayed): a
# block of the inode table and a directory block, and a revoke record; with journal checksums
# (v3) on ext4.
mkj() { # NAME BASE JOURNAL_OPEN_ARGS...
  local name=$1 base=$2
  shift 2
  [ -f "$tmp/$base" ] || return 0
  cp "$tmp/$base" "$tmp/$name"
  head -c 1024 /dev/zero | tr '\0' '\1' >"$tmp/jblock"
  printf 'jo %s\njw -b 40,60 %s\njw -r 61\njc\n' "$*" "$tmp/jblock" >"$tmp/jcmds"
  debugfs -w -f "$tmp/jcmds" "$tmp/$name" >/dev/null 2>&1 && imgs+=("$tmp/$name") ||
    echo "debugfs journal $name failed: seed skipped" >&2
}
mkj mkfs-ext3-recover mkfs-ext3
mkj mkfs-ext4-recover-csum mkfs-ext4 -c
# An htree directory (300 hard links to one file, indexed by e2fsck -D).
mkdir -p "$tmp/htree/d"
: >"$tmp/htree/f"
for i in $(seq 1 300); do ln "$tmp/htree/f" "$tmp/htree/d/entry-with-a-longer-name-$i"; done
if mke2fs -q -F -b 1024 -N 64 -t ext4 -O ^has_journal -d "$tmp/htree" "$tmp/mkfs-ext4-htree" 1024 >/dev/null 2>&1; then
  e2fsck -fyD "$tmp/mkfs-ext4-htree" >/dev/null 2>&1 || true
  imgs+=("$tmp/mkfs-ext4-htree")
fi
# FUZZ_CORPUS: where the corpus is kept (default fuzz/corpus, kept between runs; loading a big
# one takes a while before the SECONDS start).
corpus=${FUZZ_CORPUS:-fuzz/corpus}
mkdir -p fuzz/seeds "$corpus" fuzz/artifacts
"$seeder" fuzz/seeds "${imgs[@]}"
# The target: sanitizer coverage as cargo-fuzz sets it, without a sanitizer (the check, io
# and format crates forbid unsafe code); its own target dir and workspace.
# --target keeps the flags off build scripts and proc-macros (they run on the host).
host=$CARGO_BUILD_TARGET
unset CARGO_BUILD_TARGET "CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
# FUZZ_CHECKS=1: with overflow checks and debug assertions too (as the tests build), in its
# own target dir: an arithmetic overflow on an on-disk value is then a crash.
tdir=fuzz/target
if [ -n "${FUZZ_CHECKS:-}" ]; then
  RUSTFLAGS="$RUSTFLAGS -Coverflow-checks -Cdebug-assertions"
  tdir=fuzz/target/checks
fi
cargo build --release -q --manifest-path fuzz/Cargo.toml --target "$host" --target-dir "$tdir" --bin check_repair
bin="$tdir/$host/release/check_repair"
# The target must report a panic and an oversized allocation as crashes (its self-test).
for t in panic alloc; do
  printf 'selftest-%s' "$t" >"$tmp/selftest"
  if FFSCK_FUZZ_SELFTEST=1 "$bin" -artifact_prefix="$tmp/" "$tmp/selftest" >"$tmp/selftest.log" 2>&1; then
    echo "fuzz self-test: a $t was not reported as a crash" >&2
    exit 1
  fi
done
# -max_len: the largest packed seed; -timeout: seconds per input; -rss_limit_mb: memory.
exec "$bin" "$corpus" fuzz/seeds \
  -max_len=262144 -timeout=10 -rss_limit_mb=2048 -max_total_time="$secs" \
  -print_final_stats=1 -artifact_prefix=fuzz/artifacts/ "$@"
