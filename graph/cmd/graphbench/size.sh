#!/usr/bin/env bash
# The graph's size levers beside usearch HNSW f16, one run, same cores: for each dataset, rounds
# of the npm peer script (usearch only) and graphbench once per configuration in $CONFIGS
# (';'-separated graphbench flags), interleaved, every process pinned to $CORES with 2 threads.
# Prints JSON lines and '#' lines with the load, like compare.sh; best.py reads them.
#
# usage (from the project root): graph/cmd/graphbench/size.sh [DATASET...] > out.jsonl
# env: W=/tmp/graphbench, ROUNDS=2, CORES=0,1, EFS=16,24,32,48,64,96,
#      CONFIGS='-bits 7 -compact -rerank-count 16;-bits 8 -compact -rerank-count 16'
set -euo pipefail
W=${W:-/tmp/graphbench}; ROUNDS=${ROUNDS:-2}; CORES=${CORES:-0,1}; EFS=${EFS:-16,24,32,48,64,96}
CONFIGS=${CONFIGS:--bits 7 -compact -rerank-count 16;-bits 8 -compact -rerank-count 16}
data=$(cd "$(dirname "$0")/../../../../shared/data" && pwd)
mkdir -p "$W"
go build -o "$W/vlc" ./cmd/vlc
go build -o "$W/graphbench" ./graph/cmd/graphbench
pin() { taskset -c "$CORES" env GOMAXPROCS=2 "$@"; }
IFS=';' read -ra CFG <<< "$CONFIGS"
for d in ${@:-deep10k sift5k-ngt}; do
  D=$data/$d
  mq=0; [ "$d" = deep10k ] && mq=1000
  pin "$W/vlc" compress "$D/base.fvecs" -o "$W/$d-b4.vlc" -bits 4 -code rotated -metric l2 -quiet
  A=(-base "$D/base.fvecs" -query "$D/query.fvecs" -gt "$D/groundtruth.ivecs" -maxq $mq -name "$d" -nprobe 8 -index "$W/$d-b4.vlc" -ef "$EFS")
  for round in $(seq "$ROUNDS"); do
    echo "# $d round $round, load $(cut -d' ' -f1-3 /proc/loadavg)"
    SYSTEMS=usearch USEARCH_QUANT=f16 SKIP_VLC=1 EFS=$EFS W=$W/npm CORES=$CORES ../shared/peers/npm/run.sh "$d" 2>/dev/null
    for c in "${CFG[@]}"; do
      # shellcheck disable=SC2086
      pin "$W/graphbench" "${A[@]}" $c 2>&1 | sed 's/^graphbench:/# graphbench:/'
    done
    echo "# $d round $round done, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
