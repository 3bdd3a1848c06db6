#!/usr/bin/env python3
"""Best QPS at recall@10 >= 0.95 and >= 0.99 per (dataset, system) from compare.sh's output:
each JSON line is one round's point, so a point counts only where that round reached the
recall. usage: python3 best.py out.jsonl"""
import collections, json, sys

points = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith('{'):
        continue
    j = json.loads(line)
    ef = j['param'].get('ef', j['param'].get('expansion_search'))
    points[(j['dataset'], j['system'] + ' ' + j['index'])].append((j['qps'], j['recall@10'], ef, j['size_ratio'], j['build_s']))
for threshold in (0.95, 0.99):
    print(f'recall@10 >= {threshold}')
    for (ds, system), pts in points.items():
        ok = [p for p in pts if p[1] >= threshold]
        if not ok:
            print(f'  {ds:12} {system:55} none')
            continue
        qps, recall, ef, size, build = max(ok)
        print(f'  {ds:12} {system:55} {qps:7d} QPS  recall {recall:.4f}  ef {ef:3d}  size {size:.3f}  build {build:.2f} s')
