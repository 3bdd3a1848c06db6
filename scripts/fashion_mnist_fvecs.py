# Converts the Fashion-MNIST IDX files (Debian dataset-fashion-mnist) to base.fvecs and
# query.fvecs (float32 pixels 0..255, the ann-benchmarks split: train = base, test = queries).
# usage: python3 scripts/fashion_mnist_fvecs.py OUTDIR [IDXDIR]
import gzip, struct, sys, os
import numpy as np
out = sys.argv[1]
d = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
os.makedirs(out, exist_ok=True)
for src, dst in (("train-images-idx3-ubyte.gz", "base.fvecs"), ("t10k-images-idx3-ubyte.gz", "query.fvecs")):
    raw = gzip.open(os.path.join(d, src)).read()
    magic, n, r, c = struct.unpack(">iiii", raw[:16])
    x = np.frombuffer(raw[16:], dtype=np.uint8).reshape(n, r * c).astype(np.float32)
    rec = np.empty((n, r * c + 1), dtype=np.float32)
    rec[:, 0] = np.array([r * c], dtype=np.int32).view(np.float32)[0]
    rec[:, 1:] = x
    rec.tofile(os.path.join(out, dst))
    print(dst, n, r * c)
