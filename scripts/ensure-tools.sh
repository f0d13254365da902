#!/usr/bin/env bash
# Make sure the tools the demo and tests need are present: a Rust toolchain and e2fsprogs
# (mke2fs, debugfs, e2fsck), installing e2fsprogs from Debian's packages when missing; and,
# best effort, xfsprogs (mkfs.xfs, xfs_repair, xfs_db) for the XFS experiments, whose tests
# skip without it; and, best effort, what the package test (crates/cli/tests/system/package.rs) drives:
# man-db and groff (the man page), make and binutils (`make install` strips), dpkg (the .deb),
# file, util-linux fsck.
set -euo pipefail
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi
if ! command -v mke2fs >/dev/null 2>&1 || ! command -v debugfs >/dev/null 2>&1 || ! command -v e2fsck >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null
  else
    echo "e2fsprogs (mke2fs, debugfs, e2fsck) is required; install it with your package manager" >&2
    exit 1
  fi
fi
if ! command -v mkfs.xfs >/dev/null 2>&1 || ! command -v xfs_repair >/dev/null 2>&1 || ! command -v xfs_db >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs >/dev/null; } ||
      echo "xfsprogs could not be installed: the XFS experiments and tests will be skipped" >&2
  else
    echo "xfsprogs not installed: the XFS experiments and tests will be skipped" >&2
  fi
fi
# Best effort: what the package test (man, groff, make, binutils' strip/objcopy/readelf,
# dpkg-deb, file, util-linux fsck) and the tests of mount detection through partitions and
# device-mapper devices (sfdisk from Debian's fdisk package, dmsetup) need; those parts skip,
# saying so, without them.
missing=()
for t in man:man-db groff:groff-base make:make objcopy:binutils dpkg-deb:dpkg file:file fsck:util-linux sfdisk:fdisk dmsetup:dmsetup; do
  command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
      echo "${missing[*]} could not be installed: the tests that need them will be skipped" >&2
  else
    echo "${missing[*]} not installed: the tests that need them will be skipped" >&2
  fi
fi
