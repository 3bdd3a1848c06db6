# Queries for gen_clusters.py's data: fresh noise around the same 1,024 centres
# (the centres are drawn again from the same seed), and their exact ground truth.
# usage: python3 scripts/gen_queries.py BASE.f16 D NQ QUERIES.fvecs GT.ivecs
# The ground truth: the 128 nearest candidates by a float32 matrix product (on
# the GPU with PyTorch when there is one, TF32 off; else numpy), re-ranked in
# float64 against the base as stored (float16 decoded exactly); 10 ids a row.
import sys, numpy as np
base_path, d, nq, q_path, gt_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
k = 1024
c = np.random.default_rng(1).standard_normal((k, d), dtype=np.float32)  # gen_clusters.py's first draw
rng = np.random.default_rng(2)
lab = rng.integers(0, k, nq)
q = (c[lab] + 0.5 * rng.standard_normal((nq, d), dtype=np.float32)).astype(np.float32)
x16 = np.fromfile(base_path, dtype=np.float16).reshape(-1, d)
cand = 128
try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError
    torch.backends.cuda.matmul.allow_tf32 = False
    x = torch.from_numpy(x16).cuda().float()
    xn = (x * x).sum(1)
    tq = torch.from_numpy(q).cuda()
    ids = []
    for lo in range(0, nq, 256):
        s = xn[None, :] - 2 * (tq[lo:lo + 256] @ x.T)
        ids.append(torch.topk(s, cand, dim=1, largest=False).indices.cpu().numpy())
    ids = np.concatenate(ids)
except ImportError:
    x = x16.astype(np.float32)
    xn = (x * x).sum(1)
    ids = np.concatenate([np.argpartition(xn[None, :] - 2 * (q[lo:lo + 64] @ x.T), cand, axis=1)[:, :cand]
                          for lo in range(0, nq, 64)])
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
