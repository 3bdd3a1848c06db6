#!/usr/bin/env python3
"""Search speed beside FAISS, one run: vlc's and FAISS's best QPS at a recall@10
level, same threads, and their ratio (make bench-search).

For each dataset (deep10k and sift5k-ngt by default; DATA, default .data, holds a
folder per dataset with base.fvecs, query.fvecs, groundtruth.ivecs) it compresses
the base at 8 and 4 bits (seed 1), sweeps vlc eval's nprobe, and runs
scripts/peers/faiss_qps.py on IVF<4 sqrt n>,SQ8 and ,SQ4 over the same nprobe
values (Debian's python3-faiss, run with /usr/bin/python3). The best QPS at or
above each recall level is compared: 8 bits with SQ8 at 0.90 and 0.95, 4 bits
with SQ4 at 0.88. THREADS (default 2) sets GOMAXPROCS and FAISS's threads.
"""
import json, math, os, subprocess, sys

VLC = os.environ.get("VLC", "bin/vlc")
DATA = os.environ.get("DATA", ".data")
OUT = os.environ.get("OUT", "bench-out")
THREADS = os.environ.get("THREADS", "2")
NPROBE = os.environ.get("NPROBE", "2,4,8,16,32,64")
PY = os.environ.get("FAISS_PYTHON", "/usr/bin/python3")
# (vlc bits, FAISS code, recall levels)
PAIRS = [(8, "SQ8", [0.90, 0.95]), (4, "SQ4", [0.88])]


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def fvecs_rows(path):
    with open(path, "rb") as f:
        d = int.from_bytes(f.read(4), "little")
    return os.path.getsize(path) // (4 + 4 * d)


def best(rows, level):
    ok = [r for r in rows if r["recall"] >= level]
    return max(ok, key=lambda r: r["qps"]) if ok else None


def main(names):
    os.makedirs(OUT, exist_ok=True)
    env = dict(os.environ, GOMAXPROCS=THREADS)
    print(f"| dataset | level | vlc setting | vlc nprobe | vlc recall@10 | vlc QPS | vlc size ratio | FAISS | FAISS nprobe | FAISS recall@10 | FAISS QPS | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        base, query, gt = (f"{DATA}/{name}/{f}" for f in ("base.fvecs", "query.fvecs", "groundtruth.ivecs"))
        nlist = max(16, int(4 * math.sqrt(fvecs_rows(base))))
        for bits, sq, levels in PAIRS:
            ix = f"{OUT}/{name}-{bits}.vlc"
            run([VLC, "compress", base, "-code", "rotated", "-bits", str(bits), "-seed", "1", "-o", ix], env)
            out = run([VLC, "eval", ix, "-query", query, "-gt", gt, "-sweep-nprobe", NPROBE, "-json"], env)
            vlc = [{"nprobe": r["nprobe"], "recall": r["recall@10"], "qps": r["qps"], "ratio": r["size_ratio"]} for r in json.loads(out)]
            factory = f"IVF{nlist},{sq}"
            out = run([PY, "scripts/peers/faiss_qps.py", base, query, gt, factory, "--threads", THREADS, "--nprobe", NPROBE])
            faiss = [{"nprobe": r["nprobe"], "recall": r["recall@10"], "qps": r["qps"]} for r in (json.loads(l) for l in out.splitlines() if l.startswith("{")) if r.get("index")]
            for level in levels:
                v, f = best(vlc, level), best(faiss, level)
                vs = f"{v['nprobe']} | {v['recall']:.4f} | {v['qps']:,.0f} | {v['ratio']:.3f}" if v else "- | - | - | -"
                fs = f"{f['nprobe']} | {f['recall']:.4f} | {f['qps']:,.0f}" if f else "- | - | -"
                ratio = f"{v['qps'] / f['qps']:.2f}x" if v and f else "-"
                print(f"| {name} | >= {level:.2f} | {bits} bits | {vs} | {factory} | {fs} | {ratio} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["deep10k", "sift5k-ngt"])
