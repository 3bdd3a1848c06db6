#!/usr/bin/env bash
# size.sh for data given as files (the 1M rows of README's "1M x 96 rows"): rounds of the npm
# peer script (usearch HNSW f16 only, its `files` mode) and graphbench once per configuration in
# $CONFIGS (';'-separated graphbench flags), every process pinned to $CORES with 2 threads.
# Prints JSON lines and '#' lines with build times and the load; best.py reads them.
#
# usage (from the project root): BASE=x.npy QUERY=q.fvecs GT=gt.ivecs NAME=gen1m \
#          graph/cmd/graphbench/files.sh > out.jsonl
# env: W=/tmp/graphbench, ROUNDS=1, CORES=0,1, EFS=16,24,32,48,64,96,128, BITS=4 (vlc compress),
#      CONFIGS='-rerank;-bits 7 -compact -rerank-count 16;-bits 8 -compact -rerank-count 16',
#      GB_FLAGS='-nprobe 8' (every graphbench run), SKIP_USEARCH=1, INDEX=an existing index
set -euo pipefail
: "${BASE:?BASE=file}" "${QUERY:?QUERY=file}" "${GT:?GT=file .ivecs}"
NAME=${NAME:-files}; W=${W:-/tmp/graphbench}; ROUNDS=${ROUNDS:-1}; CORES=${CORES:-0,1}
EFS=${EFS:-16,24,32,48,64,96,128}; BITS=${BITS:-4}; GB_FLAGS=${GB_FLAGS:--nprobe 8}
CONFIGS=${CONFIGS:--rerank;-bits 7 -compact -rerank-count 16;-bits 8 -compact -rerank-count 16}
mkdir -p "$W"
go build -o "$W/vlc" ./cmd/vlc
go build -o "$W/graphbench" ./graph/cmd/graphbench
pin() { taskset -c "$CORES" env GOMAXPROCS=2 "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
IX=${INDEX:-$W/$NAME-b$BITS.vlc}
if [ -z "${INDEX:-}" ]; then
  echo "# vlc compress -bits $BITS, load $(load)"
  t0=$(date +%s.%N)
  pin "$W/vlc" compress "$BASE" -o "$IX" -bits "$BITS" -code rotated -metric l2 -quiet
  echo "# vlc compress $NAME -bits $BITS -code rotated: $(echo "$(date +%s.%N) - $t0" | bc) s, load $(load)"
fi
IFS=';' read -ra CFG <<< "$CONFIGS"
for round in $(seq "$ROUNDS"); do
  if [ -z "${SKIP_USEARCH:-}" ]; then
    echo "# $NAME round $round usearch, load $(load)"
    BASE=$BASE QUERY=$QUERY GT=$GT METRIC=l2 NAME=$NAME SYSTEMS=usearch USEARCH_QUANT=f16 SKIP_VLC=1 \
      EFS=$EFS W=$W/npm CORES=$CORES ../shared/peers/npm/run.sh files 2>&1 | sed 's/^\([^{]\)/# \1/'
  fi
  for c in "${CFG[@]}"; do
    echo "# $NAME round $round graphbench $c, load $(load)"
    # shellcheck disable=SC2086
    pin "$W/graphbench" -base "$BASE" -query "$QUERY" -gt "$GT" -name "$NAME" -index "$IX" -ef "$EFS" $GB_FLAGS $c 2>&1 \
      | sed 's/^graphbench:/# graphbench:/'
  done
  echo "# $NAME round $round done, load $(load)"
done
