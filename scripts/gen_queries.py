# Queries for gen_clusters.py's data: fresh noise around the same 1,024 centres
# (the centres are drawn again from the same seed), and their exact ground truth.
# usage: python3 scripts/gen_queries.py BASE.f16 D NQ QUERIES.fvecs GT.ivecs
# The ground truth: the 128 nearest candidates by a float32 matrix product (on
# the GPU with PyTorch when there is one, TF32 off; else numpy), re-ranked in
# float64 against the base as stored (float16 decoded exactly); 10 ids a row.
# The base is read a million rows at a time, so it may be larger than memory.
import sys, numpy as np
base_path, d, nq, q_path, gt_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
k = 1024
c = np.random.default_rng(1).standard_normal((k, d), dtype=np.float32)  # gen_clusters.py's first draw
rng = np.random.default_rng(2)
lab = rng.integers(0, k, nq)
q = (c[lab] + 0.5 * rng.standard_normal((nq, d), dtype=np.float32)).astype(np.float32)
x16 = np.memmap(base_path, dtype=np.float16, mode='r').reshape(-1, d)
cand = 128
chunk = 1 << 20  # base rows a pass holds as float32: the base may outgrow memory


def merge(best, dist, ids):
    """Keeps each query's cand smallest of (best, new) by distance."""
    if best is None:
        return dist, ids
    dist, ids = np.concatenate([best[0], dist], 1), np.concatenate([best[1], ids], 1)
    top = np.argpartition(dist, cand, axis=1)[:, :cand]
    return np.take_along_axis(dist, top, 1), np.take_along_axis(ids, top, 1)


best = None
try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError
    torch.backends.cuda.matmul.allow_tf32 = False
    tq = torch.from_numpy(q).cuda()
    for lo in range(0, len(x16), chunk):
        x = torch.from_numpy(np.ascontiguousarray(x16[lo:lo + chunk])).cuda().float()
        xx = (x * x).sum(1)[None, :]
        vs, js = [], []
        for qlo in range(0, nq, 2048):  # 2,048 queries x 1M rows: 8 GiB a pass
            s = xx - 2 * (tq[qlo:qlo + 2048] @ x.T)
            v, i = torch.topk(s, min(cand, len(x)), dim=1, largest=False)
            vs.append(v.cpu()); js.append(i.cpu())
            del s
        best = merge(best, torch.cat(vs).numpy(), torch.cat(js).numpy() + lo)
except ImportError:
    for lo in range(0, len(x16), chunk):
        x = x16[lo:lo + chunk].astype(np.float32)
        xn = (x * x).sum(1)
        dist, ids = [], []
        for qlo in range(0, nq, 64):
            s = xn[None, :] - 2 * (q[qlo:qlo + 64] @ x.T)
            top = np.argpartition(s, min(cand, len(x) - 1), axis=1)[:, :cand]
            dist.append(np.take_along_axis(s, top, 1))
            ids.append(top + lo)
        best = merge(best, np.concatenate(dist), np.concatenate(ids))
ids = best[1]
gt = np.empty((nq, 10), dtype=np.int32)
for i in range(nq):
    diff = x16[ids[i]].astype(np.float64) - q[i].astype(np.float64)
    dist = (diff * diff).sum(1)
    order = np.lexsort((ids[i], dist))[:10]
    gt[i] = ids[i][order]
with open(q_path, 'wb') as f:
    for row in q:
        np.array([d], dtype=np.int32).tofile(f); row.tofile(f)
with open(gt_path, 'wb') as f:
    for row in gt:
        np.array([10], dtype=np.int32).tofile(f); row.tofile(f)
print(f"{q_path}: {nq} x {d}; {gt_path}: 10 exact neighbours each")
