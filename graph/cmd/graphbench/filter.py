#!/usr/bin/env python3
"""filter.sh's output as a table: per dataset, ef, share and plan, the lowest recall@10 and
the best QPS over the rounds, and that QPS over the unfiltered search's best at the same ef.
usage: python3 filter.py out.jsonl"""
import collections, json, sys

points = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if not line.startswith('{'):
        continue
    j = json.loads(line)
    f = j.get('filter')
    key = (j['dataset'], j['param']['ef'], f['share'] if f else 0, f['plan'] if f else 'none')
    points[key].append((j['qps'], j['recall@10'], j.get('rows_scored', 0), f['allowed'] if f else 0))
print('| data | ef | share (rows allowed) | plan | recall@10 | QPS | vs unfiltered | rows scored |')
print('|---|---|---|---|---|---|---|---|')
for key in sorted(points):
    ds, ef, share, plan = key
    pts = points[key]
    qps, recall = max(p[0] for p in pts), min(p[1] for p in pts)
    base = points.get((ds, ef, 0, 'none'))
    ratio = f'{qps / max(p[0] for p in base):.2f}x' if base else '-'
    scored = f'{pts[0][2]:.0f}' if plan != 'ivf' else '-'
    label = f'{share:g} ({pts[0][3]})' if share else 'unfiltered'
    print(f'| {ds} | {ef} | {label} | {plan} | {recall:.3f} | {qps:,} | {ratio} | {scored} |')
