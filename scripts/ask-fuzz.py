#!/usr/bin/env python3
"""Interactive repair against e2fsck, fuzzed: each case builds a small image (mke2fs -d),
damages it with a few random debugfs edits, then runs `e2fsck -f` and `ffsck -f` on
pseudo-terminals (pexpect), answering each question yes or no by a hash of its text without
numbers (so both checkers get the same answers), and judges both results with `e2fsck -fn`.
A case passes when the exit codes are equal and ffsck's result holds no more problems than
e2fsck's. Failing cases keep both transcripts in their folder.

    pip install pexpect
    python3 scripts/ask-fuzz.py SEED CASES [NO_PER_1000]      (root not needed)

FF=path/to/ffsck picks the binary (default: the release build); ASK_FUZZ_DIR the work folder.
"""
import pexpect, sys, re, random, subprocess, os, hashlib, shutil
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FF = os.environ.get('FF', os.path.join(ROOT, 'target', subprocess.run(['rustc', '-vV'], capture_output=True, text=True).stdout.split('host: ')[1].split()[0], 'release', 'ffsck'))
W = os.environ.get('ASK_FUZZ_DIR', '/tmp/ask-fuzz')

def key(q):
    q = q.replace("('a' enables 'yes' to all) ", '')
    q = re.sub(r'\d+', '#', q)
    q = re.sub(r'\s+', ' ', q).strip()
    return q

def drive(cmd, seed, pno):
    child = pexpect.spawn(cmd[0], cmd[1:], encoding='utf-8', timeout=60, dimensions=(50, 250))
    out = ''; last = 0; qs = []
    while True:
        i = child.expect([r'<[yn]>\? ', pexpect.EOF, pexpect.TIMEOUT], timeout=60)
        out += child.before + (child.after if isinstance(child.after, str) else '')
        if i != 0:
            break
        ctx = out[last:]
        last = len(out)
        # the question: text after the last blank line / answer
        lines = [l for l in ctx.replace('\r', '').split('\n') if l.strip()]
        q = ' '.join(lines[-2:]) if lines and lines[-1].startswith(('Fix', 'Clear', 'Salvage', 'Relocate', 'Create', 'Connect', 'Abort', 'Recreate', 'Optimize', 'Truncate', 'Delete', 'Clone', 'Unlink', 'Split', 'Continue', 'Expand', 'Allocate', 'Suppress', 'Ignore', 'Set', 'Reconnect')) and len(lines) > 1 else (lines[-1] if lines else '')
        k = key(q)
        h = int(hashlib.sha256(f'{seed}:{k}'.encode()).hexdigest(), 16)
        ans = 'n' if (h % 1000) < pno else 'y'
        qs.append((k, ans))
        child.send(ans)
    child.close()
    return child.exitstatus, out.replace('\r', ''), qs

def nproblems(img):
    r = subprocess.run(['e2fsck', '-fn', img], capture_output=True, text=True)
    n = len(re.findall(r'\? no\n', r.stdout))
    return r.returncode, n, r.stdout

def build(case, rng):
    d = f'{W}/s{SEED}c{case}'; shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    src = f'{d}/src'; os.makedirs(src)
    for i in range(rng.randint(3, 8)):
        dd = f'{src}/d{i}'; os.makedirs(dd)
        for j in range(rng.randint(2, 25)):
            with open(f'{dd}/f{j}', 'wb') as f: f.write(os.urandom(rng.choice([0, 100, 1500, 5000, 20000, 70000])))
        if rng.random() < 0.3:
            os.symlink(f'f0', f'{dd}/ln')
    img = f'{d}/base.img'
    fs = rng.choice([['-t', 'ext4'], ['-t', 'ext4', '-b', '1024'], ['-t', 'ext3'], ['-t', 'ext2'], ['-t', 'ext4', '-O', '^metadata_csum']])
    subprocess.run(['mke2fs', '-q', '-F'] + fs + ['-d', src, img, '16M'], check=True, capture_output=True)
    # damage
    inos = list(range(12, 12 + 60))
    cmds = []
    for _ in range(rng.randint(1, 5)):
        ino = rng.choice(inos)
        k = rng.randrange(9)
        if k == 0: cmds.append(f'sif <{ino}> links_count {rng.randint(0, 9)}')
        elif k == 1: cmds.append(f'clri <{ino}>')
        elif k == 2: cmds.append(f'freei <{ino}>')
        elif k == 3: cmds.append(f'sif <{ino}> size {rng.randint(0, 100000)}')
        elif k == 4: cmds.append(f'sif <{ino}> block[{rng.randint(0, 3)}] {rng.randint(0, 20000)}')
        elif k == 5: cmds.append(f'freeb {rng.randint(100, 15000)} {rng.randint(1, 8)}')
        elif k == 6: cmds.append(f'setb {rng.randint(100, 15000)} {rng.randint(1, 8)}')
        elif k == 7: cmds.append(f'sif <{ino}> blocks {rng.randint(0, 999)}')
        elif k == 8: cmds.append(f'sif <{ino}> dtime {rng.randint(1, 99999)}')
    for c in cmds:
        subprocess.run(['debugfs', '-w', '-R', c, img], capture_output=True)
    return d, img, cmds

SEED=0
def main():
    global SEED
    seed = int(sys.argv[1]); SEED = seed; n = int(sys.argv[2]); pno = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    bad = 0
    for case in range(n):
        rng = random.Random(seed * 100000 + case)
        d, img, cmds = build(case, rng)
        if subprocess.run(['e2fsck', '-fn', img], capture_output=True).returncode == 0:
            continue
        e = f'{d}/e.img'; f = f'{d}/f.img'
        shutil.copy(img, e); shutil.copy(img, f)
        aseed = rng.randrange(1 << 30)
        ec, eo, eq = drive(['e2fsck', '-f', e], aseed, pno)
        fc, fo, fq = drive([FF, '-f', f], aseed, pno)
        er, en, _ = nproblems(e); fr, fn, fout = nproblems(f)
        ok = ec == fc and fn <= en
        if not ok: bad += 1
        print(f'case {case}: exit e2fsck {ec} ffsck {fc}; -fn after: e2fsck {en} ffsck {fn} {"OK" if ok else "DIFF"}  damage={cmds}', flush=True)
        if not ok:
            open(f'{d}/e.out', 'w').write(eo); open(f'{d}/f.out', 'w').write(fo); open(f'{d}/f.after', 'w').write(fout)
    print('bad', bad)
main()
