#!/usr/bin/env bash
# Build a Debian package of ffsck: `make install DESTDIR=stage PREFIX=/usr` (the static release
# binary, stripped as Debian ships binaries, its man page and completions), the licences as
# /usr/share/doc/ffsck/copyright, a hand-written DEBIAN/control, then `dpkg-deb --build`. No
# cargo-deb: it would take minutes to build here, and the package is simple. The fsck.ext2/3/4
# links are not in the package, so it installs beside e2fsprogs without conflict;
# `make install-fsck-links PREFIX=/usr` adds them.
#
#   scripts/deb.sh [OUT_DIR]            (default target/debian; prints the .deb's path)
#   FFSCK_BIN=path scripts/deb.sh ...   package a prebuilt binary instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/debian}")
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/ffsck_${version}_$arch"

make -s install DESTDIR="$stage" PREFIX=/usr GEN="$work/gen" ${FFSCK_BIN:+FFSCK_BIN="$FFSCK_BIN"} >&2
# The control file declares no Depends: the binary must not need shared libraries.
if ! file -L "$stage/usr/sbin/ffsck" | grep -q 'static'; then
  echo "deb.sh: $stage/usr/sbin/ffsck is dynamically linked; build it with scripts/build-env.sh" >&2
  exit 1
fi
doc="$stage/usr/share/doc/ffsck"
install -d "$doc"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: ffsck"
  echo
  echo "Files: *"
  echo "Copyright: 2026 The ffsck authors"
  echo "License: MIT or Apache-2.0"
  echo
  echo "License: MIT"
  sed -e 's/^$/./' -e 's/^/ /' LICENSE-MIT
  echo
  echo "License: Apache-2.0"
  echo " On Debian systems, the full text of the Apache License 2.0 is in"
  echo " /usr/share/common-licenses/Apache-2.0."
} > "$doc/copyright"
chmod 0644 "$doc/copyright"

install -d "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: ffsck
Version: $version
Section: admin
Priority: optional
Architecture: $arch
Maintainer: The ffsck authors <ffsck@localhost>
Installed-Size: $size
Suggests: e2fsprogs
Description: fast, parallel ext2/ext3/ext4 file system checker
 ffsck checks ext2, ext3 and ext4 file systems with e2fsck's flags, verdicts,
 problem codes and exit codes, using all cores. A repair is committed as one
 transaction in the file system's own journal. The binary is linked
 statically, for rescue media. The fsck.ext2/3/4 links are not installed:
 e2fsprogs keeps them (see ffsck(8), BOOT USE, to make fsck run ffsck).
EOF

mkdir -p "$out"
deb="$out/ffsck_${version}_$arch.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"
