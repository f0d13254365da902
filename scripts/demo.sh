#!/usr/bin/env bash
# The ffsck demo: build, make a populated ext4 image, age it (when loop mounts are allowed),
# damage it in logged, reproducible ways, check it with ffsck (and e2fsck for comparison),
# repair it crash-safely with an undo file, verify the result with e2fsck, and show the report.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
source scripts/build-env.sh
cargo build --release --workspace --bins
lab="$BIN/ffsck-lab"; ffsck="$BIN/ffsck"
out=out/demo
rm -rf "$out" && mkdir -p "$out"
img="$out/demo.img"

echo "== Build: a reproducible ext4 image (files profile, 20000 inodes, seed 7)"
"$lab" mkfs --profile files --inodes 20000 --seed 7 --out "$img"

echo; echo "== Age: ffsck-style aging through a loop mount (needs root and loop devices)"
if ! "$lab" age --method ffsck --image "$img" --seed 7 --secs 20 --report "$out/age.json"; then
  echo "(aging skipped: mounting is not allowed here; the demo continues on the fresh image)"
fi

echo; echo "== Damage: logged, reproducible corruption (manifests in $out/)"
"$lab" corrupt --image "$img" --seed 7 --field 'inode[12].i_blocks_lo' --op add --manifest "$out/m1.json"
"$lab" corrupt --image "$img" --seed 7 --field 'inode[13].i_links_count' --op add --manifest "$out/m2.json"
"$lab" corrupt --image "$img" --seed 7 --field 'inode[14].i_dtime' --op set=12345 --manifest "$out/m3.json"
"$lab" corrupt --image "$img" --seed 7 --component inode-bitmap --group 0 --manifest "$out/m4.json"
"$lab" corrupt --image "$img" --seed 7 --field 'gd[0].bg_free_blocks_count_lo' --op sub --csum stale --manifest "$out/m5.json"
cp "$img" "$out/damaged.img"

set +e
echo; echo "== ffsck -fn (read-only check)"
"$ffsck" -fn -t --json "$out/check.json" --problem-log "$out/ffsck.xml" "$img"
echo "(exit code $?)"
echo; echo "== e2fsck -fn (reference)"
e2fsck -fn "$img" > "$out/e2fsck.txt" 2>&1
echo "(exit code $?; output in $out/e2fsck.txt)"

echo; echo "== ffsck -fy --undo-file (repair: staged, logged, committed, undoable)"
"$ffsck" -fy --undo-file "$out/undo" --json "$out/repair.json" "$img"
echo "(exit code $?)"
echo; echo "== e2fsck -fn after the repair"
e2fsck -fn "$img"
echo "(exit code $?)"
echo; echo "== ffsck --apply-undo puts the damaged image back, byte for byte"
cp "$img" "$out/repaired.img"
"$ffsck" --apply-undo "$out/undo" "$img" && cmp "$img" "$out/damaged.img" && echo "identical to the damaged image"
cp "$out/repaired.img" "$img"
set -e

echo; echo "== Report"
python3 - "$out/check.json" "$out/repair.json" <<'PY' 2>/dev/null || cat "$out/repair.json"
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    f = r.get("findings", [])
    print(f"{path}: exit {r.get('exit_code')}, {len(f)} findings, {sum(1 for x in f if x.get('fixed'))} fixed")
    for x in f[:12]:
        print(f"  {x['code']:<32} e2fsck {x.get('e2fsck_code','')}  fixed={x.get('fixed')}")
PY
echo "Files: $out/check.json, $out/repair.json (JSON), $out/ffsck.xml (e2fsck-format problem log), manifests $out/m*.json."
