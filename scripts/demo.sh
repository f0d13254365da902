#!/usr/bin/env bash
# The ffsck demo: build, make a populated ext4 image, damage it in several ways, check it with
# ffsck (and e2fsck for comparison) and show the report.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
source scripts/build-env.sh
cargo build --release --workspace --bins
out=out/demo
rm -rf "$out" && mkdir -p "$out/tree"
# A small tree: nested directories, files of varied sizes, a symlink and a hard link.
for d in 1 2 3 4 5 6 7 8; do
  mkdir -p "$out/tree/dir$d/sub"
  for f in $(seq 1 40); do head -c $(( (d * 977 + f * 389) % 30000 )) /dev/urandom > "$out/tree/dir$d/file$f"; done
done
ln -s dir1/file1 "$out/tree/link"; ln "$out/tree/dir1/file2" "$out/tree/hardlink"
img="$out/demo.img"
mke2fs -q -F -t ext4 -L demo -d "$out/tree" "$img" 64M
echo "== Damage: wrong i_blocks, stale link count, orphaned file, freed bitmap bit, group count"
debugfs -w -R "sif /dir1/file3 blocks 12345" "$img" 2>/dev/null
debugfs -w -R "sif /dir2/file4 links_count 7" "$img" 2>/dev/null
debugfs -w -R "unlink /dir3/file5" "$img" 2>/dev/null
debugfs -w -R "freei /dir4/file6" "$img" 2>/dev/null
debugfs -w -R "set_bg 1 free_blocks_count 3" "$img" 2>/dev/null
echo
echo "== ffsck -fn $img"
set +e
"$BIN/ffsck" -fn -t --json "$out/report.json" --problem-log "$out/ffsck.xml" "$img"
echo "(exit code $?)"
echo
echo "== e2fsck -fn $img (reference)"
e2fsck -fn "$img"
echo "(exit code $?)"
set -e
echo
echo "Reports: $out/report.json (JSON findings), $out/ffsck.xml (e2fsck-format problem log)."
echo "Repair (-y/-p) is not implemented yet; ffsck refuses it without writing."
