#!/usr/bin/env bash
# Graph beside usearch HNSW f16, one run, same cores: for each dataset, rounds of the npm
# peer script (usearch only) and graphbench (4-bit codes + float16 re-rank, 8-bit codes, 4-bit
# codes alone), interleaved, every process pinned to $CORES with 2 threads. Prints JSON lines
# (the peer script's and graphbench's) and '#' lines with the build and load.
#
# usage (from the project root): graph/cmd/graphbench/compare.sh [DATASET...] > out.jsonl
# env: W=/tmp/graphbench (work dir, outside the repository), ROUNDS=2, CORES=0,1,
#      EFS=16,20,24,32,40,48,64,96
set -euo pipefail
W=${W:-/tmp/graphbench}; ROUNDS=${ROUNDS:-2}; CORES=${CORES:-0,1}; EFS=${EFS:-16,20,24,32,40,48,64,96}
data=$(cd "$(dirname "$0")/../../../../shared/data" && pwd)
mkdir -p "$W"
go build -o "$W/vlc" ./cmd/vlc
go build -o "$W/graphbench" ./graph/cmd/graphbench
pin() { taskset -c "$CORES" env GOMAXPROCS=2 "$@"; }
for ds in "${@:-deep10k sift5k-ngt}"; do
  for d in $ds; do
    D=$data/$d
    mq=0; [ "$d" = deep10k ] && mq=1000   # the peer script's query count
    for B in 4 8; do
      t0=$(date +%s.%N)
      pin "$W/vlc" compress "$D/base.fvecs" -o "$W/$d-b$B.vlc" -bits $B -code rotated -metric l2 -quiet
      echo "# vlc compress $d -bits $B -code rotated: $(echo "$(date +%s.%N) - $t0" | bc) s"
    done
    A=(-base "$D/base.fvecs" -query "$D/query.fvecs" -gt "$D/groundtruth.ivecs" -maxq $mq -name "$d" -nprobe 8)
    for round in $(seq "$ROUNDS"); do
      echo "# $d round $round, load $(cut -d' ' -f1-3 /proc/loadavg)"
      SYSTEMS=usearch USEARCH_QUANT=f16 SKIP_VLC=1 EFS=$EFS W=$W/npm CORES=$CORES ../shared/peers/npm/run.sh "$d" 2>/dev/null
      pin "$W/graphbench" "${A[@]}" -index "$W/$d-b4.vlc" -rerank -ef "$EFS" 2>&1 | sed 's/^graphbench:/# graphbench:/'
      pin "$W/graphbench" "${A[@]}" -index "$W/$d-b8.vlc" -ef "$EFS" 2>&1 | sed 's/^graphbench:/# graphbench:/'
      pin "$W/graphbench" "${A[@]}" -index "$W/$d-b4.vlc" -ef 16,32,64,128 2>&1 | sed 's/^graphbench:/# graphbench:/'
    done
  done
done
