#!/usr/bin/env python3
"""Regenerates the vlc tables of docs/bench/recall.md (make bench-quality).

For each dataset and each bits setting: compress (timed), then `vlc eval
-sweep -json` without and with exact re-rank (factor 10); reports the
plateau nprobe (the smallest whose recall@10 is within 0.002 of the
sweep's best), a fast setting (the smallest nprobe reaching 90% of that
recall), and nprobe 64; the re-ranked sweep gets its own plateau. Standard
library only. Datasets are read from DATA (default .data, ignored by git):
a folder per dataset holding base.fvecs, query.fvecs and groundtruth.ivecs
(docs/bench/README.md lists them and where they come from); fashion-mnist's
vectors from .data/fashion-mnist (scripts/fashion_mnist_fvecs.py writes
them from Debian's dataset-fashion-mnist).

usage: [CODE=pq] [BITS=4,2,1 | RATIOS=0.32,0.2,0.12] scripts/bench_quality.py [dataset ...]

RATIOS compresses with -ratio instead of -bits (for pq: the most subspaces
that fit); the setting column then shows the ratio and the code chosen.
FM overrides the folder of fashion-mnist's vectors.
"""
import json, os, struct, subprocess, sys, time

VLC = os.environ.get("VLC", "bin/vlc")
DATA = os.environ.get("DATA", ".data")
OUT = os.environ.get("OUT", "bench-out")
BITS = [int(b) for b in os.environ.get("BITS", "8,4,2,1").split(",")]
CODE = os.environ.get("CODE", "rotated")  # the -code flag
RATIOS = [r for r in os.environ.get("RATIOS", "").split(",") if r]
FM = os.environ.get("FM", ".data/fashion-mnist")


def fvecs_head(src, dst, n):
    """Writes the first n records of an .fvecs/.ivecs file."""
    with open(src, "rb") as f:
        d = struct.unpack("<i", f.read(4))[0]
        f.seek(0)
        data = f.read(n * 4 * (d + 1))
    with open(dst, "wb") as f:
        f.write(data)


def datasets():
    fm = FM
    os.makedirs(OUT, exist_ok=True)
    if os.path.exists(fm + "/query.fvecs") and not os.path.exists(OUT + "/fm-query2k.fvecs"):
        fvecs_head(fm + "/query.fvecs", OUT + "/fm-query2k.fvecs", 2000)
        fvecs_head(DATA + "/fashion-mnist/groundtruth.ivecs", OUT + "/fm-gt2k.ivecs", 2000)
    return {
        "deep10k": (DATA + "/deep10k/base.fvecs", DATA + "/deep10k/query.fvecs", DATA + "/deep10k/groundtruth.ivecs"),
        "sift5k-ngt": (DATA + "/sift5k-ngt/base.fvecs", DATA + "/sift5k-ngt/query.fvecs", DATA + "/sift5k-ngt/groundtruth.ivecs"),
        "fashion-mnist": (fm + "/base.fvecs", OUT + "/fm-query2k.fvecs", OUT + "/fm-gt2k.ivecs"),
    }


def run(*args):
    return subprocess.run([VLC, *args], check=True, capture_output=True, text=True).stdout


def sweep(index, query, gt, rerank=None):
    args = ["eval", index, "-query", query, "-gt", gt, "-sweep", "-json"]
    if rerank:
        args += ["-rerank", rerank, "-rerank-factor", "10"]
    return json.loads(run(*args))


def pick(rows):
    best = max(r["recall@10"] for r in rows)
    plateau = next(r for r in rows if r["recall@10"] >= best - 0.002)
    fast = next(r for r in rows if r["recall@10"] >= 0.9 * plateau["recall@10"])
    at64 = next((r for r in rows if r["nprobe"] == 64), rows[-1])
    return plateau, fast, at64


def main():
    sets = datasets()
    names = sys.argv[1:] or list(sets)
    print("| dataset | code | setting | B/vector | size ratio | compress s | plateau nprobe | R@1 | R@10 | QPS | fast nprobe | R@10 | QPS | R@10 at nprobe 64 | +rerank 10x: nprobe | R@10 | QPS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        base, query, gt = sets[name]
        settings = [("-ratio", r) for r in RATIOS] or [("-bits", str(b)) for b in BITS]
        for flag, value in settings:
            index = f"{OUT}/{name}-{CODE}{flag}{value}.vlc"
            t = time.time()
            run("compress", base, "-o", index, flag, value, "-code", CODE, "-seed", "1", "-quiet")
            secs = time.time() - t
            info = json.loads(run("info", index, "-json"))
            setting = f"{info['bits']} bits" if flag == "-bits" else f"ratio {value}"
            if info.get("subspaces"):
                setting += f": {info['subspaces']} subspaces, {info['bits_per_dim']:.2f} bits/dim"
            elif flag == "-ratio":
                setting += f": {info['bits']} bits"
            plain = sweep(index, query, gt)
            p, f, s64 = pick(plain)
            rp, _, _ = pick(sweep(index, query, gt, rerank=base))
            print(f"| {name} | {CODE} | {setting} | {p['bytes_per_vector']:.1f} | {p['size_ratio']:.3f} | {secs:.1f} | "
                  f"{p['nprobe']} | {p['recall@1']:.3f} | {p['recall@10']:.3f} | {p['qps']:.0f} | "
                  f"{f['nprobe']} | {f['recall@10']:.3f} | {f['qps']:.0f} | {s64['recall@10']:.3f} | "
                  f"{rp['nprobe']} | {rp['recall@10']:.3f} | {rp['qps']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
