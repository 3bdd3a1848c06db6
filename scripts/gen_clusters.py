# Writes N x D float16 (raw .f16) from 1,024 Gaussian clusters, seeded: the compress benchmark input.
# usage: python3 scripts/gen_clusters.py OUT.f16 N D [torch]   (numpy; torch: PyTorch on the GPU)
# With "torch" the rows are drawn on the GPU, about 50x faster: the same centres
# and distribution, another stream of labels and noise (so other rows).
import numpy as np, sys
n, d, k = int(sys.argv[2]), int(sys.argv[3]), 1024
rng = np.random.default_rng(1)
c = rng.standard_normal((k, d), dtype=np.float32)
if len(sys.argv) > 4 and sys.argv[4] == 'torch':
    import torch
    g = torch.Generator(device='cuda').manual_seed(1)
    tc = torch.from_numpy(c).cuda()
    with open(sys.argv[1], 'wb') as f:
        for lo in range(0, n, 1 << 20):
            m = min(n, lo + (1 << 20)) - lo
            lab = torch.randint(0, k, (m,), device='cuda', generator=g)
            x = tc[lab] + 0.5 * torch.randn((m, d), device='cuda', generator=g)
            f.write(x.half().cpu().numpy().tobytes())
    sys.exit(0)
out = np.empty((n, d), dtype=np.float16)
for lo in range(0, n, 100000):
    hi = min(n, lo + 100000)
    lab = rng.integers(0, k, hi - lo)
    out[lo:hi] = (c[lab] + 0.5 * rng.standard_normal((hi - lo, d), dtype=np.float32)).astype(np.float16)
out.tofile(sys.argv[1])
