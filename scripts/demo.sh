#!/usr/bin/env bash
# The ffsck demo: build, make a populated ext4 image, age it (when loop mounts are allowed),
# damage it in logged, reproducible ways, check it with ffsck and with e2fsck (both outputs, their
# differences, what the exit codes mean, and both wall times: best of 3 alternating runs),
# repair it crash-safely with an undo file, verify the result with e2fsck, undo the repair, and
# list every finding of the check and the repair.
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

# What the exit codes mean (e2fsck(8), EXIT CODE; ffsck's are the same): a sum of these bits.
meaning() {
  local code=$1 bit words=()
  [ "$code" -eq 0 ] && { echo "0 = no errors"; return; }
  for bit in 1:"errors corrected" 2:"errors corrected, reboot needed" 4:"errors left uncorrected" \
    8:"operational error" 16:"usage or syntax error" 32:"cancelled by the user" \
    128:"shared-library error"; do
    (( code & ${bit%%:*} )) && words+=("${bit%%:*} ${bit#*:}")
  done
  local joined
  joined=$(printf ' + %s' "${words[@]}")
  echo "$code = ${joined:3}"
}
# Seconds of wall time of one run of "$@" (its output goes to $out/timing.log).
wall() {
  local t0=$EPOCHREALTIME
  "$@" >"$out/timing.log" 2>&1
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f", b - a }'
}
min() { awk -v a="$1" -v b="${2:-$1}" 'BEGIN { print (a < b) ? a : b }'; }

set +e
echo; echo "== ffsck -fn (read-only check)"
"$ffsck" -fn --json "$out/check.json" --problem-log "$out/ffsck.xml" "$img" 2>&1 | tee "$out/ffsck.txt"
ff_code=${PIPESTATUS[0]}
echo "(exit code $(meaning "$ff_code"))"
echo; echo "== e2fsck -fn (the reference, same image)"
e2fsck -fn "$img" 2>&1 | tee "$out/e2fsck.txt"
e2_code=${PIPESTATUS[0]}
echo "(exit code $(meaning "$e2_code"))"

echo; echo "== The two outputs compared (e2fsck's version banner aside)"
if diff -u --label "e2fsck -fn" --label "ffsck -fn" <(grep -v '^e2fsck [0-9]' "$out/e2fsck.txt") \
  "$out/ffsck.txt" > "$out/compare.diff"; then
  if [ "$ff_code" = "$e2_code" ]; then echo "identical, and so are the exit codes"
  else echo "identical, but the exit codes differ: $ff_code and $e2_code"; fi
else
  echo "they differ ($out/compare.diff; exit codes $ff_code and $e2_code):"
  cat "$out/compare.diff"
fi

echo; echo "== Wall time, -fn on the same image: best of 3 runs each, alternating"
ff_best=; e2_best=
for run in 1 2 3; do
  t=$(wall "$ffsck" -fn "$img"); ff_best=$(min "$t" "$ff_best")
  u=$(wall e2fsck -fn "$img"); e2_best=$(min "$u" "$e2_best")
  echo "  run $run: ffsck $t s, e2fsck $u s"
done
awk -v f="$ff_best" -v e="$e2_best" -v n="$(nproc)" 'BEGIN {
  printf "best: ffsck %.3f s, e2fsck %.3f s: ffsck takes %.0f%% of e2fsck'"'"'s time (%d cores)\n", f, e, 100 * f / e, n }'

echo; echo "== ffsck -fy --undo-file (repair: staged, logged, committed, undoable)"
"$ffsck" -fy --undo-file "$out/undo" --json "$out/repair.json" "$img"
echo "(exit code $(meaning $?))"
echo; echo "== e2fsck -fn after the repair"
e2fsck -fn "$img"
echo "(exit code $(meaning $?))"
echo; echo "== ffsck --apply-undo puts the damaged image back, byte for byte"
cp "$img" "$out/repaired.img"
"$ffsck" --apply-undo "$out/undo" "$img" && cmp "$img" "$out/damaged.img" && echo "identical to the damaged image"
cp "$out/repaired.img" "$img"
set -e

echo; echo "== Report: every finding of the check and of the repair (from their JSON reports)"
python3 - "$out/check.json" "$out/repair.json" <<'PY' || cat "$out/check.json" "$out/repair.json"
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    f = r.get("findings", [])
    print(f"{path}: exit {r.get('exit_code')}, {len(f)} findings, {sum(1 for x in f if x.get('fixed'))} fixed")
    for x in f:
        message = " ".join(x.get("message", "").split())
        print(f"  {x['code']:<28} {x.get('e2fsck_code', ''):<9} "
              f"{'fixed' if x.get('fixed') else 'not fixed':<9} {message}")
PY
echo "Files in $out/: check.json, repair.json (JSON reports), ffsck.xml (e2fsck-format problem log),"
echo "ffsck.txt, e2fsck.txt and compare.diff (the two checks' output), m*.json (damage manifests)."
