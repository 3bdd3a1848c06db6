#!/usr/bin/env bash
# One GPU against an index split over several (vlc eval -backend cuda
# -devices), batches of 10,000 queries, on a machine with the GPUs. Builds
# nothing: give it a vlc built with -tags cuda and the files.
#
# usage: scripts/bench_multigpu.sh VLC INDEX QUERIES GT [NPROBE] [RUNS]
#   VLC      a vlc binary built with -tags cuda (CGO_ENABLED=0 go build -tags cuda ./cmd/vlc)
#   INDEX    an index file of the rotated code (vlc compress ... -code rotated)
#   QUERIES  the queries (.f16, .npy or .fvecs); GT their ground truth (.ivecs)
#   NPROBE   lists probed per query (64); RUNS: runs of each setting, alternating (3)
#   DEVICES  (environment) the split's devices: all (default), or numbers such as
#            0,1, or 0,0 (two shares on one GPU: the fan-out's cost alone)
#   SPREAD   (environment) lists (default: each device a share of the lists) or
#            queries (each device the whole index, a share of each batch)
#
# Prints each run's QPS, recall@10 and device memory, then the medians.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,14p' "$0"; exit 2; }
vlc=$1 index=$2 queries=$3 gt=$4 nprobe=${5:-64} runs=${6:-3}
devices=${DEVICES:-all} spread=${SPREAD:-lists}
nvidia-smi -L || true

# eval VLC_ARGS... prints "qps recall@10 device_mib" for one run.
eval1() {
	local out
	out=$("$vlc" eval "$index" -query "$queries" -gt "$gt" -nprobe "$nprobe" -backend cuda -batch 10000 "$@") ||
		{ echo "vlc eval $* failed" >&2; return 1; }
	awk '/^recall@10/ {r=$2} /^qps/ {q=$2} /^device memory/ {m=$3} END {print q, r, m}' <<<"$out"
}

one=() split=()
printf '%-22s %4s %10s %10s %12s\n' setting run qps recall@10 device_MiB
for r in $(seq "$runs"); do
	res=$(eval1)
	read -r q rc m <<<"$res"
	one+=("$q")
	printf '%-22s %4d %10s %10s %12s\n' "one GPU" "$r" "$q" "$rc" "$m"
	res=$(eval1 -devices "$devices" -spread "$spread")
	read -r q rc m <<<"$res"
	split+=("$q")
	printf '%-22s %4d %10s %10s %12s\n' "-devices $devices -spread $spread" "$r" "$q" "$rc" "$m"
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
m1=$(median "${one[@]}") ms=$(median "${split[@]}")
echo "median QPS at batch 10000, nprobe $nprobe: one GPU $m1, -devices $devices $ms ($(awk -v a="$ms" -v b="$m1" 'BEGIN {printf "%.2fx", a/b}'))"
