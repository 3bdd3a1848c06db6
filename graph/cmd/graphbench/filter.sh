#!/usr/bin/env bash
# Filtered search on the graph: for each dataset, rounds of one graphbench each that times,
# in turns, the unfiltered search and each plan at each share (the graph's auto, walk and
# scan; the index's own filtered search, ivf), 4-bit codes + float16 re-rank, pinned to
# $CORES with 2 threads. Prints graphbench's JSON lines and '#' lines with the load;
# filter.py summarises them.
#
# usage (from the project root): graph/cmd/graphbench/filter.sh [DATASET...] > out.jsonl
# env: W=/tmp/graphbench (work dir, outside the repository), ROUNDS=2, CORES=0,1, EFS=32,64,
#      SHARES="0.01 0.1 0.5", PLANS="auto walk scan ivf"
set -euo pipefail
W=${W:-/tmp/graphbench}; ROUNDS=${ROUNDS:-2}; CORES=${CORES:-0,1}; EFS=${EFS:-32,64}
SHARES=${SHARES:-0.01 0.1 0.5}; PLANS=${PLANS:-auto walk scan ivf}
data=$(cd "$(dirname "$0")/../../../../shared/data" && pwd)
mkdir -p "$W"
go build -o "$W/vlc" ./cmd/vlc
go build -o "$W/graphbench" ./graph/cmd/graphbench
pin() { taskset -c "$CORES" env GOMAXPROCS=2 "$@"; }
for d in "${@:-deep10k}"; do
  D=$data/$d
  mq=0; [ "$d" = deep10k ] && mq=1000
  pin "$W/vlc" compress "$D/base.fvecs" -o "$W/$d-b4.vlc" -bits 4 -code rotated -metric l2 -quiet
  A=(-index "$W/$d-b4.vlc" -base "$D/base.fvecs" -query "$D/query.fvecs" -gt "$D/groundtruth.ivecs"
     -maxq $mq -name "$d" -nprobe 8 -rerank -ef "$EFS" -reps 7)
  for round in $(seq "$ROUNDS"); do
    echo "# $d round $round, load $(cut -d' ' -f1-3 /proc/loadavg)"
    pin "$W/graphbench" "${A[@]}" -filter "0,${SHARES// /,}" -plan "${PLANS// /,}" 2>&1 | sed 's/^graphbench:/# graphbench:/'
  done
  echo "# $d done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
