#!/usr/bin/env bash
# Build settings shared by the scripts (source it): release builds for the host target, with
# the C runtime linked statically on glibc Linux, as e2fsprogs ships e2fsck.static. A static
# ffsck runs from a rescue shell or initramfs and maps no shared libraries, which is most of the
# resident memory of a small check. `$BIN` is where the binaries land.
host=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_BUILD_TARGET="$host"
case "$host" in
  *-linux-gnu)
    var="CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUSTFLAGS"
    export "$var"="${!var:-} -C target-feature=+crt-static"
    ;;
esac
BIN="target/$host/release"
