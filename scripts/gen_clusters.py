# Writes N x D float16 (raw .f16) from 1,024 Gaussian clusters, seeded: the compress benchmark input.
# usage: python3 scripts/gen_clusters.py OUT.f16 N D   (numpy)
import numpy as np, sys
n, d, k = int(sys.argv[2]), int(sys.argv[3]), 1024
rng = np.random.default_rng(1)
c = rng.standard_normal((k, d), dtype=np.float32)
out = np.empty((n, d), dtype=np.float16)
for lo in range(0, n, 100000):
    hi = min(n, lo + 100000)
    lab = rng.integers(0, k, hi - lo)
    out[lo:hi] = (c[lab] + 0.5 * rng.standard_normal((hi - lo, d), dtype=np.float32)).astype(np.float16)
out.tofile(sys.argv[1])
