#!/usr/bin/python3
"""Whole-file sizes of FAISS indexes beside their recall, for docs/bench/recall.md.

peers/faiss_bench.py counts a FAISS index as its codes plus an
8-byte id per vector; this counts every byte faiss.write_index writes
(coarse centroids, codebooks, OPQ matrix, codes, ids), the way vlc's sizes
are counted, and prints recall@10 at nprobe 64 for the same specs.
Run with Debian's python3-faiss: /usr/bin/python3 scripts/faiss_sizes.py BASE QUERY GT [--threads 2]
"""
import argparse, time
import numpy as np, faiss


def load(path):
    a = np.fromfile(path, dtype=np.int32)
    d = a[0]
    a = a.reshape(-1, d + 1)[:, 1:]
    return a.copy() if path.endswith(".ivecs") else a.view(np.float32).copy()


ap = argparse.ArgumentParser()
ap.add_argument("base"); ap.add_argument("query"); ap.add_argument("gt")
ap.add_argument("--threads", type=int, default=2); ap.add_argument("--nlist", type=int, default=0)
ap.add_argument("--nprobe", type=int, default=64)
a = ap.parse_args()
faiss.omp_set_num_threads(a.threads)
xb, xq, gt = load(a.base), load(a.query), load(a.gt)[:, :10]
n, d = xb.shape
nlist = a.nlist or max(16, int(4 * np.sqrt(n)))
print(f"# n={n} d={d} nq={len(xq)} nlist={nlist} nprobe={a.nprobe} float16 bytes/vector={2 * d}")
print(f"{'method':28s} {'file B/vec':>10s} {'ratio':>6s} {'codes+ids B/vec':>15s} {'R@10':>6s} {'train_s':>8s}")
specs = [
    ("IVF%d,SQ8" % nlist, d), ("IVF%d,SQ4" % nlist, d // 2),
    ("IVF%d,PQ%dx8" % (nlist, d // 4), d // 4), ("IVF%d,PQ%dx8" % (nlist, d // 8), d // 8),
    ("OPQ%d,IVF%d,PQ%dx8" % (d // 8, nlist, d // 8), d // 8),
]
for spec, code in specs:
    idx = faiss.index_factory(d, spec)
    t = time.time(); idx.train(xb); tt = time.time() - t
    idx.add(xb)
    faiss.extract_index_ivf(idx).nprobe = a.nprobe
    _, I = idx.search(xq, 10)
    r = np.mean([len(set(I[i]) & set(gt[i])) / 10 for i in range(len(xq))])
    size = len(faiss.serialize_index(idx))
    print(f"{spec:28s} {size / n:10.1f} {size / n / (2 * d):6.3f} {code + 8:15d} {r:6.3f} {tt:8.1f}", flush=True)
