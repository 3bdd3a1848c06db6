#!/usr/bin/env bash
# The device search's figures (docs/bench/cuda.md, "Search, 2026-11-27"), on a
# GPU machine: 1M x 768 from gen_clusters.py, 10,000 queries with exact ground
# truth, a 4-bit rotated index of 4,096 lists; then vlc eval on the device at
# batches of 10,000 and 1,000 and one query at a time, the CPU, PyTorch's exact
# search, a store of 10 segments with 5 % deleted (ids outside every query's
# true top 10, so the ground truth stands) against itself compacted, vlc serve
# under load (loadtest, requests of 100) on the device and the CPU, sq8 and pq.
# Builds nothing: give it binaries built with -tags cuda.
#
# usage: scripts/bench_gpu_search.sh VLC LOADTEST [DIR]
#   VLC       CGO_ENABLED=0 go build -tags cuda ./cmd/vlc
#   LOADTEST  (cd loadtest && CGO_ENABLED=0 go build -tags cuda .)
#   DIR       scratch folder (default /tmp/vlc-bench-gpu: about 3 GB)
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,15p' "$0"; exit 2; }
vlc=$1 loadtest=$2 D=${3:-/tmp/vlc-bench-gpu} S=$(dirname "$0")
mkdir -p "$D"; nvidia-smi -L
python3 "$S/gen_clusters.py" "$D/base.f16" 1000000 768 torch &&
python3 "$S/gen_queries.py" "$D/base.f16" 768 10000 "$D/q.fvecs" "$D/gt.ivecs" > /dev/null || exit 1
python3 - "$D" <<'PY'
import sys, numpy as np
d = sys.argv[1]
a = np.fromfile(f'{d}/q.fvecs', dtype=np.int32).reshape(-1, 769)[:, 1:].view(np.float32); np.save(f'{d}/q.npy', a)
b = np.memmap(f'{d}/base.f16', dtype=np.float16, mode='r').reshape(-1, 768)
for i in range(9): b[910000 + i*10000:920000 + i*10000].tofile(f'{d}/add{i}.f16')
gt = np.fromfile(f'{d}/gt.ivecs', dtype=np.int32).reshape(10000, -1)[:, 1:11]
free = np.setdiff1d(np.arange(1000000), np.unique(gt))
np.savetxt(f'{d}/del.txt', np.sort(np.random.default_rng(5).choice(free, 50000, replace=False)), fmt='%d')
PY
C="-backend cuda -bits 4 -code rotated -anchors 4096 -seed 1 -dim 768"
"$vlc" compress $C -o "$D/i.vlc" "$D/base.f16" | tail -1
Q="-nprobe 64 -gt $D/gt.ivecs -query $D/q.fvecs"
show() { echo "== $1"; grep -i "qps\|recall@10\|latency\|codes\|bandwidth\|store \|device memory"; }
for b in 10000 1000; do "$vlc" eval -backend cuda $Q -batch $b -min-time 2s "$D/i.vlc" 2>&1 | show "cuda, batches of $b"; done
"$vlc" eval -backend cuda $Q -latency "$D/i.vlc" 2>&1 | show "cuda, one query at a time"
"$vlc" eval -backend cpu $Q "$D/i.vlc" 2>&1 | show "cpu"
for b in 1000 10000; do python3 "$S/peers/torch_exact.py" "$D/base.f16" 768 "$D/q.npy" $b; done
"$vlc" compress $C -rows 0:910000 -o "$D/s.vlc" "$D/base.f16" > /dev/null
for i in 0 1 2 3 4 5 6 7 8; do "$vlc" add -maintain=false "$D/s.vlc" "$D/add$i.f16" > /dev/null; done
"$vlc" delete -maintain=false -ids "$D/del.txt" "$D/s.vlc" | tail -1
for b in 10000 1000; do "$vlc" eval -backend cuda $Q -batch $b -min-time 2s "$D/s.vlc" 2>&1 | show "store on cuda, batches of $b"; done
"$vlc" eval -backend cpu $Q "$D/s.vlc" 2>&1 | show "store on cpu"
"$vlc" compact "$D/s.vlc" > /dev/null
for b in 10000 1000; do "$vlc" eval -backend cuda $Q -batch $b -min-time 2s "$D/s.vlc" 2>&1 | show "compacted, cuda, batches of $b"; done
for be in cuda cpu; do echo "== loadtest $be"; "$loadtest" -backend $be -index "$D/i.vlc" -query "$D/q.fvecs" -nprobe 64 -clients 32 -duration 5s -only '100 queries a request'; done
"$vlc" compress -backend cuda -bits 8 -code sq8 -anchors 4096 -seed 1 -dim 768 -o "$D/sq8.vlc" "$D/base.f16" | tail -1
"$vlc" eval -backend cuda $Q -batch 10000 -min-time 2s "$D/sq8.vlc" 2>&1 | show "sq8, cuda, batches of 10000"
"$vlc" compress -backend cuda -bits 4 -code pq -anchors 4096 -seed 1 -dim 768 -o "$D/pq.vlc" "$D/base.f16" | tail -1
"$vlc" eval -backend cuda $Q -batch 10000 -min-time 2s "$D/pq.vlc" 2>&1 | show "pq, cuda, batches of 10000"
"$vlc" eval -backend cpu $Q "$D/pq.vlc" 2>&1 | show "pq, cpu"
