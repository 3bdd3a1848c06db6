#!/usr/bin/env node
// LanceDB used the way a RAG service uses it, on the data bench/ragstore
// generated: a table created empty and grown by single adds and by adds of
// 100 rows, fragments and bytes sampled as it grows, mergeInsert (upsert)
// and delete of a sample, searches (flat, then with the IVF_PQ index
// createIndex("vector") makes and scalar indexes on cat and n) unfiltered
// and with SQL where filters, recall@10 against the same ground truth.
// Prints one JSON line per measurement (the rows of main.go); progress on
// stderr. Run by `go run ./bench/ragstore`, which passes every flag.
'use strict';
const fs = require('fs');
const path = require('path');
const lancedb = require('@lancedb/lancedb');
const arrow = require('apache-arrow');

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  if (i >= 0) return process.argv[i + 1];
  if (def === undefined) throw new Error(`--${name} is required`);
  return def;
}
const log = (...a) => console.error('[lance.js]', ...a);
const round = (x, k) => Math.round(x * 10 ** k) / 10 ** k;
const now = () => process.hrtime.bigint();
const since = (t) => Number(process.hrtime.bigint() - t) / 1e9;

function pkgVersion(name) {
  for (const dir of (process.env.NODE_PATH || '').split(':').concat(module.paths)) {
    const f = path.join(dir, name, 'package.json');
    if (dir && fs.existsSync(f)) return JSON.parse(fs.readFileSync(f, 'utf8')).version;
  }
  return '?';
}
const system = 'lancedb-' + pkgVersion('@lancedb/lancedb');
const emit = (r) => process.stdout.write(JSON.stringify({ system, ...r }) + '\n');

// float16 bits to float32
function f16(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function readF16(file, d) {
  const buf = fs.readFileSync(file);
  if (buf.byteLength % (2 * d) !== 0) throw new Error(`${file}: ${buf.byteLength} bytes is not a whole number of ${d}-value float16 rows`);
  const n = buf.byteLength / (2 * d), out = new Float32Array(n * d);
  for (let i = 0; i < n * d; i++) out[i] = f16(buf.readUInt16LE(2 * i));
  return { n, d, data: out };
}

// TEXMEX .fvecs / .ivecs: per row an int32 dim, then dim float32 / int32 values.
function readVecs(file, Type) {
  const buf = fs.readFileSync(file);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const rows = [];
  for (let off = 0; off < buf.byteLength;) {
    const d = dv.getInt32(off, true);
    const row = new Type(d);
    for (let j = 0; j < d; j++) row[j] = Type === Float32Array ? dv.getFloat32(off + 4 + 4 * j, true) : dv.getInt32(off + 4 + 4 * j, true);
    rows.push(row);
    off += 4 + 4 * d;
  }
  return rows;
}

function dirBytes(p) {
  if (!fs.existsSync(p)) return 0;
  const st = fs.statSync(p);
  if (!st.isDirectory()) return st.size;
  let s = 0;
  for (const e of fs.readdirSync(p)) s += dirBytes(path.join(p, e));
  return s;
}

async function main() {
  const dataDir = arg('data'), d = parseInt(arg('dim'), 10), N = parseInt(arg('n'), 10);
  const work = arg('work'), passes = parseInt(arg('passes', '3'), 10), sampleEvery = parseInt(arg('sample', '1000'), 10);
  const singleN = Math.min(N, parseInt(arg('single-n', String(N)), 10));
  const upsertN = parseInt(arg('upsert-n', '1000'), 10);
  const prefixes = arg('prefixes').split(',').map(Number);
  const filters = JSON.parse(arg('filters'));
  const grownQ = parseInt(arg('grown-queries', '20'), 10);

  const base = readF16(path.join(dataDir, 'base.f16'), d);
  if (base.n !== N) throw new Error(`${dataDir}/base.f16 holds ${base.n} rows, --n says ${N}`);
  const payloads = fs.readFileSync(path.join(dataDir, 'payloads.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const queries = readVecs(path.join(dataDir, 'query.fvecs'), Float32Array);
  const truth = (key) => readVecs(path.join(dataDir, `gt-${key}.ivecs`), Int32Array);
  log(`${N} documents x ${d}, ${queries.length} queries`);

  // An Arrow table of rows [lo, hi): the cheapest way a Node user hands
  // rows to LanceDB (no per-row object conversion).
  function rows(lo, hi) {
    const n = hi - lo;
    const ids = new Int32Array(n), ns = new Int32Array(n), cats = new Array(n);
    for (let i = 0; i < n; i++) { ids[i] = lo + i; ns[i] = payloads[lo + i].n; cats[i] = payloads[lo + i].cat; }
    const child = arrow.makeData({ type: new arrow.Float32(), length: n * d, data: base.data.subarray(lo * d, hi * d) });
    const listType = new arrow.FixedSizeList(d, new arrow.Field('item', new arrow.Float32(), true));
    const vec = arrow.makeData({ type: listType, length: n, nullCount: 0, child });
    return new arrow.Table({
      id: arrow.makeVector(ids), cat: arrow.vectorFromArray(cats, new arrow.Utf8()),
      n: arrow.makeVector(ns), vector: arrow.makeVector(vec),
    });
  }

  fs.rmSync(work, { recursive: true, force: true });
  const db = await lancedb.connect(work);
  const schema = rows(0, 1).schema;

  async function sample(tbl, mode, adds, addS) {
    const st = await tbl.stats();
    emit({ kind: 'sample', mode, adds, segments: st.fragmentStats.numFragments, bytes: st.totalBytes,
      disk_bytes: dirBytes(path.join(work, mode + '.lance')), rows: st.numRows, add_seconds: round(addS, 3) });
  }

  // nq: the first queries used (a table of many fragments answers in
  // hundreds of milliseconds, so its grown state gets fewer)
  async function searchAll(tbl, where, key, nPasses, nq) {
    const gt = truth(key);
    nq = Math.min(nq || queries.length, queries.length);
    const lat = [];
    let hit = 0, want = 0;
    for (let pass = 0; pass <= nPasses; pass++) {
      for (let qi = 0; qi < nq; qi++) {
        let q = tbl.query().nearestTo(queries[qi]).distanceType('l2').limit(10).select(['id']);
        if (where) q = q.where(where);
        const t = now();
        const res = await q.toArrow();
        const s = since(t);
        if (pass === 0) continue;
        lat.push(s);
        if (pass === nPasses) {
          const col = res.getChild('id'), set = new Set(gt[qi]);
          for (let j = 0; j < col.length; j++) if (set.has(col.get(j))) hit++;
          want += gt[qi].length;
        }
      }
    }
    lat.sort((a, b) => a - b);
    const ms = (s) => round(s * 1000, 4);
    return { p50_ms: ms(lat[lat.length >> 1]), p99_ms: ms(lat[Math.min(lat.length - 1, Math.floor(lat.length * 99 / 100))]),
      mean_ms: ms(lat.reduce((a, b) => a + b, 0) / lat.length), 'recall@10': round(want ? hit / want : 0, 4), queries: nq, passes: nPasses };
  }

  async function measure(tbl, mode, state, withFilters, index, nq) {
    const st = await tbl.stats();
    emit({ kind: 'size', mode, state, index, segments: st.fragmentStats.numFragments, bytes: st.totalBytes,
      disk_bytes: dirBytes(path.join(work, mode + '.lance')), rows: st.numRows, bytes_per_vector: round(st.totalBytes / st.numRows, 1) });
    emit({ kind: 'search', mode, state, index, filter: 'none', share: 1, ...await searchAll(tbl, '', `prefix-${N}`, passes, nq) });
    if (!withFilters) return;
    for (const f of filters) {
      emit({ kind: 'search', mode, state, index, filter: f.name, share: f.share, filter_impl: `where ${f.sql}`, ...await searchAll(tbl, f.sql, f.key, passes, nq) });
    }
  }

  // one part: a table grown by adds of `batch` rows, searched grown, then
  // after optimize (compaction, old versions removed), then with indexes
  async function part(mode, batch) {
    const tbl = await db.createEmptyTable(mode, schema);
    const timed = batch === 1 ? singleN : N;
    let addS = 0;
    for (let i = 0; i < timed;) {
      const hi = Math.min(i + batch, timed);
      const data = rows(i, hi);
      const t = now();
      await tbl.add(data);
      addS += since(t);
      const prev = i;
      i = hi;
      if (Math.floor(i / sampleEvery) !== Math.floor(prev / sampleEvery) || i === timed) await sample(tbl, mode, i, addS);
      if (batch === 1 && prefixes.includes(i)) {
        const r = await searchAll(tbl, '', `prefix-${i}`, 1, grownQ);
        emit({ kind: 'recall', mode, docs: i, 'recall@10': r['recall@10'], index: 'flat', queries: r.queries, segments: (await tbl.stats()).fragmentStats.numFragments });
      }
      if (batch === 1 && i % 1000 === 0) log(`${mode}: ${i} adds, ${round(i / addS, 1)}/s`);
    }
    emit({ kind: 'write', mode, op: 'add', unit: batch === 1 ? '1 per call' : `${batch} per call`, count: timed, seconds: round(addS, 3), per_s: round(timed / addS, 1) });
    if (timed < N) {
      await tbl.add(rows(timed, N));
      emit({ kind: 'note', mode, note: `single adds measured for the first ${timed} rows; the other ${N - timed} were added in one call, untimed` });
    }
    // grown: unfiltered only, over the first --grown-queries queries
    await measure(tbl, mode, 'grown', false, 'flat', grownQ);
    if (batch > 1 && upsertN > 0) {
      for (const ub of [1, 100]) {
        const t = now();
        for (let i = 0; i < upsertN; i += ub) {
          const idx = [];
          for (let j = i; j < Math.min(i + ub, upsertN); j++) idx.push(j * Math.floor(N / upsertN));
          // rows at spread positions: build each and concatenate
          const tabs = idx.map((r) => rows(r, r + 1));
          const data = tabs.length === 1 ? tabs[0] : tabs[0].concat(...tabs.slice(1));
          await tbl.mergeInsert('id').whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(data);
        }
        const s = since(t);
        emit({ kind: 'write', mode, op: 'upsert', unit: `${ub} per call (mergeInsert)`, count: upsertN, seconds: round(s, 3), per_s: round(upsertN / s, 1) });
      }
    }
    let t = now();
    await tbl.optimize({ cleanupOlderThan: new Date() });
    emit({ kind: 'write', mode, op: 'compact', unit: 'optimize (compaction, old versions removed)', count: 1, seconds: round(since(t), 3) });
    await measure(tbl, mode, 'compacted', batch === 1, 'flat');
    t = now();
    await tbl.createIndex('vector');
    await tbl.createIndex('cat', { config: lancedb.Index.bitmap() });
    await tbl.createIndex('n', { config: lancedb.Index.btree() });
    const kinds = (await tbl.listIndices()).map((x) => `${x.columns.join(',')}:${x.indexType}`).join(' ');
    emit({ kind: 'write', mode, op: 'index', unit: `createIndex: ${kinds}`, count: 1, seconds: round(since(t), 3) });
    await measure(tbl, mode, 'compacted', true, 'IVF_PQ (createIndex default) + scalar');
    if (batch > 1 && upsertN > 0) {
      t = now();
      for (let i = 0; i < upsertN; i++) await tbl.delete(`id = ${i * Math.floor(N / upsertN)}`);
      const s = since(t);
      emit({ kind: 'write', mode, op: 'delete', unit: '1 per call', count: upsertN, seconds: round(s, 3), per_s: round(upsertN / s, 1) });
    }
  }

  await part('single', 1);
  await part('batch100', 100);
  fs.rmSync(work, { recursive: true, force: true });
}

main().catch((e) => { console.error(e); process.exit(1); });
