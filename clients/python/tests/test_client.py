"""Tests of vlc_client against a real `vlc serve` on loopback.

setUpModule compresses testdata/deep10k twice into a temporary folder
(index "ro", only read, and "deep10k", which the write tests and the
example change) and starts `vlc serve` on a free port with a bearer
token. The binary is $VLC_BIN, else the repository's bin/vlc
(../../../bin/vlc from this file; `go build -o bin/vlc ./cmd/vlc` or
`make build` makes it). A missing binary is a failure, not a skip.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
PKG = HERE.parent  # clients/python
ROOT = PKG.parent.parent  # the repository
sys.path.insert(0, str(PKG))

import vlc_client  # noqa: E402
from vlc_client import (  # noqa: E402
    BadRequest,
    Client,
    Conflict,
    ConnectionFailed,
    Document,
    Forbidden,
    Hit,
    NotFound,
    Unauthorized,
    VLCError,
)

try:
    import numpy as np
except ImportError:  # numpy is optional
    np = None

DATA = ROOT / "testdata" / "deep10k"
DIM = 96
TOKEN = "test-token-42"


def read_f16(path: Path, dim: int):
    """Rows of a raw float16 file."""
    raw = path.read_bytes()
    vals = struct.unpack(f"<{len(raw) // 2}e", raw)
    return [list(vals[i:i + dim]) for i in range(0, len(vals), dim)]


def read_vecs(path: Path, fmt: str):
    """Rows of an .fvecs ("f") or .ivecs ("i") file."""
    raw = path.read_bytes()
    rows, off = [], 0
    while off < len(raw):
        (d,) = struct.unpack_from("<i", raw, off)
        rows.append(list(struct.unpack_from(f"<{d}{fmt}", raw, off + 4)))
        off += 4 + 4 * d
    return rows


def vlc_bin() -> Path:
    b = os.environ.get("VLC_BIN")
    return Path(b).resolve() if b else (HERE / "../../../bin/vlc").resolve()


class Server:
    """A `vlc serve` process on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, binary: Path, indexes: dict, token_file: Path, log: Path, rerank: dict, data: Path):
        args = [str(binary), "serve", "-addr", "127.0.0.1:0", "-token-file", str(token_file), "-data", str(data)]
        for name, path in rerank.items():  # the original vectors, for re-ranking
            args += ["-rerank", f"{name}={path}"]
        args += [f"{name}={path}" for name, path in indexes.items()]
        self.log = log
        self._stderr = open(log, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr)
        line = []
        t = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(30)
        first = line[0].decode() if line else ""
        m = re.match(r"vlc serve: listening on (http://\S+) \((\d+) indexes\)", first)
        if not m:
            self.stop()
            raise RuntimeError(f"vlc serve did not start: stdout {first!r}, stderr {log.read_text()!r}")
        self.url = m.group(1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()
        return self.proc.returncode


TMP = None
SERVER = None
QUERIES = []
GT = []


def setUpModule():
    global TMP, SERVER, QUERIES, GT
    binary = vlc_bin()
    if not binary.is_file():
        raise RuntimeError(
            f"no vlc binary at {binary}: build it (go build -o bin/vlc ./cmd/vlc, or make build) "
            "or set VLC_BIN to its path"
        )
    TMP = tempfile.TemporaryDirectory(prefix="vlc-client-test-")
    tmp = Path(TMP.name)
    for name in ("ro", "deep10k"):
        p = subprocess.run(
            [str(binary), "compress", str(DATA / "base.f16"), "-dim", str(DIM), "-bits", "8",
             "-o", str(tmp / f"{name}.vlc")],
            capture_output=True, text=True,
        )
        if p.returncode != 0:
            raise RuntimeError(f"vlc compress exited {p.returncode}: {p.stdout}{p.stderr}")
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    SERVER = Server(binary, {"ro": tmp / "ro.vlc", "deep10k": tmp / "deep10k.vlc"}, token_file, tmp / "serve.log",
                    rerank={"ro": DATA / "base.f16"}, data=tmp / "collections")
    QUERIES = read_vecs(DATA / "query.fvecs", "f")
    GT = read_vecs(DATA / "groundtruth.ivecs", "i")


def tearDownModule():
    try:
        if SERVER is not None:
            rc = SERVER.stop()
            if rc != 0:
                raise RuntimeError(f"vlc serve exited {rc} on SIGTERM: {SERVER.log.read_text()}")
    finally:
        if TMP is not None:
            TMP.cleanup()


def bumped(base: float, i: int):
    """A vector far from deep10k's (all base), one coordinate raised by
    1 + i/5, so that documents made with different i are well apart."""
    v = [base] * DIM
    v[i] += 1 + i / 5
    return v


def recall_at_10(results) -> float:
    found = sum(len({h.id for h in hits[:10]} & {str(i) for i in GT[q][:10]}) for q, hits in enumerate(results))
    return found / (10 * len(results))


class ReadTest(unittest.TestCase):
    """Search and info on the index "ro", which nothing changes."""

    def setUp(self):
        self.c = Client(SERVER.url)  # reads need no token

    def test_health_and_ready(self):
        self.assertTrue(self.c.health())
        self.assertTrue(self.c.ready())

    def test_health_unreachable(self):
        # A port nothing listens on: the server's own, once it is closed.
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = Client(f"http://127.0.0.1:{port}", timeout=5)
        self.assertFalse(c.health())
        with self.assertRaises(ConnectionFailed) as cm:
            c.info("ro")
        self.assertIsNone(cm.exception.status)

    def test_info_and_indexes(self):
        info = self.c.info("ro")
        self.assertEqual(info["name"], "ro")
        self.assertEqual(info["dim"], DIM)
        self.assertEqual(info["metric"], "l2")
        self.assertEqual(info["live"], 10000)
        names = [i["name"] for i in self.c.indexes()]
        self.assertEqual(names, ["deep10k", "ro"])

    def test_search_one_recall(self):
        # One request per query; recall@10 against the exact ground truth
        # (vlc eval gives 0.9635 for this index at the default nprobe 16).
        results = [self.c.search("ro", q) for q in QUERIES]
        for hits in results:
            self.assertEqual(len(hits), 10)
            self.assertIsInstance(hits[0], Hit)
            d = [h.distance for h in hits]
            self.assertEqual(d, sorted(d))
            self.assertIsNone(hits[0].payload)  # compress stores no payloads
        r = recall_at_10(results)
        self.assertGreaterEqual(r, 0.93, f"recall@10 {r}")

    def test_search_batch_equals_one_by_one(self):
        batch = self.c.search_batch("ro", QUERIES, k=20)
        self.assertEqual(len(batch), len(QUERIES))
        for q in (0, 1, 57, 199):
            self.assertEqual(batch[q], self.c.search("ro", QUERIES[q], k=20))
        self.assertGreaterEqual(recall_at_10(batch), 0.93)

    def test_search_batch_equals_cli(self):
        # The server's answers are the library's: the same as `vlc search`
        # on the same index file.
        out = subprocess.run(
            [str(vlc_bin()), "search", str(Path(TMP.name) / "ro.vlc"), "-query", str(DATA / "query.fvecs"),
             "-k", "10", "-nprobe", "8"],
            check=True, capture_output=True, text=True,
        ).stdout
        want = [[] for _ in QUERIES]
        for line in out.splitlines():
            q, _rank, id_, dist = line.split("\t")
            want[int(q)].append((id_, float(dist)))
        got = self.c.search_batch("ro", QUERIES, k=10, nprobe=8)
        for q in range(len(QUERIES)):
            self.assertEqual([h.id for h in got[q]], [w[0] for w in want[q]], f"query {q}")
            for h, w in zip(got[q], want[q]):
                self.assertTrue(math.isclose(h.distance, w[1], rel_tol=1e-6, abs_tol=1e-9), (h, w))

    def test_nprobe(self):
        few = recall_at_10(self.c.search_batch("ro", QUERIES, nprobe=1))
        all_lists = recall_at_10(self.c.search_batch("ro", QUERIES, nprobe=100))
        self.assertGreaterEqual(all_lists, 0.95)
        self.assertGreater(all_lists, few)

    def test_k(self):
        for k in (1, 3, 100):
            self.assertEqual(len(self.c.search("ro", QUERIES[3], k=k)), k)

    def test_filter_ids(self):
        # Five true neighbours of query 0 beyond its top 10: with every
        # list scanned, the filtered search returns exactly those five.
        allowed = [str(i) for i in GT[0][20:25]]
        hits = self.c.search("ro", QUERIES[0], k=10, nprobe=100, filter_ids=allowed)
        self.assertEqual({h.id for h in hits}, set(allowed))
        batch = self.c.search_batch("ro", QUERIES[:3], k=10, nprobe=100, filter_ids=allowed)
        self.assertEqual(batch[0], hits)
        for hits in batch:
            self.assertTrue({h.id for h in hits} <= set(allowed))

    def test_filter_ids_empty(self):
        # Nothing allowed, no hits (not an unfiltered search).
        self.assertEqual(self.c.search("ro", QUERIES[0], filter_ids=[]), [])
        self.assertEqual(self.c.search_batch("ro", QUERIES[:2], filter_ids=[]), [[], []])

    def test_filter_both_refused(self):
        with self.assertRaises(ValueError):
            self.c.search("ro", QUERIES[0], filter_ids=["1"], where={"a": 1})

    @unittest.skipIf(np is None, "numpy is not installed (it is optional): numpy inputs not tested")
    def test_numpy(self):
        qs = np.array(QUERIES[:10], dtype=np.float32)
        self.assertEqual(self.c.search("ro", qs[0], k=5), self.c.search("ro", QUERIES[0], k=5))
        batch = self.c.search_batch("ro", qs, k=5)
        self.assertEqual(batch, self.c.search_batch("ro", QUERIES[:10], k=5))
        ids, dist = vlc_client.as_arrays(batch)
        self.assertEqual(ids.shape, (10, 5))
        self.assertEqual(dist.dtype, np.float32)
        self.assertEqual(ids[2, 0], batch[2][0].id)
        with self.assertRaises(ValueError):
            self.c.search_batch("ro", qs[0], k=5)  # one vector is not a batch
        # A float array goes as vectors_f32; float64 the same as float32.
        self.assertEqual(self.c.search_batch("ro", qs.astype(np.float64), k=5), batch)
        bad = qs.copy()
        bad[3, 7] = np.nan
        with self.assertRaisesRegex(ValueError, "vector 3, value 7"):
            self.c.search_batch("ro", bad, k=5)


class RerankTest(unittest.TestCase):
    """rerank=True on "ro", served with its original vectors (-rerank
    ro=base.f16): exact distances, the CLI's hits."""

    @classmethod
    def setUpClass(cls):
        cls.c = Client(SERVER.url)
        cls.base = read_f16(DATA / "base.f16", DIM)

    def exact(self, q, id_):
        return sum((a - b) ** 2 for a, b in zip(q, self.base[int(id_)]))

    def test_rerank_exact_distances(self):
        plain = self.c.search_batch("ro", QUERIES[:50], k=10)
        reranked = self.c.search_batch("ro", QUERIES[:50], k=10, rerank=True)
        for q, hits in enumerate(reranked):
            self.assertEqual(len(hits), 10)
            for h in hits:
                self.assertTrue(math.isclose(h.distance, self.exact(QUERIES[q], h.id), rel_tol=1e-5), (q, h))
            self.assertEqual([h.distance for h in hits], sorted(h.distance for h in hits))
        self.assertGreater(recall_at_10(reranked), recall_at_10(plain))
        self.assertEqual(self.c.search("ro", QUERIES[7], k=10, rerank=True), reranked[7])

    def test_rerank_factor(self):
        # Factor 1 re-scores only the k candidates: the same ids as
        # without re-ranking, with exact distances, nearest first.
        plain = self.c.search("ro", QUERIES[3], k=10)
        one = self.c.search("ro", QUERIES[3], k=10, rerank=True, rerank_factor=1)
        self.assertEqual({h.id for h in one}, {h.id for h in plain})
        want = sorted(self.exact(QUERIES[3], h.id) for h in plain)
        for h, w in zip(one, want):
            self.assertTrue(math.isclose(h.distance, w, rel_tol=1e-5), (h, w))

    def test_rerank_equals_cli(self):
        # vlc search -rerank on the same index and file gives the same hits.
        out = subprocess.run(
            [str(vlc_bin()), "search", str(Path(TMP.name) / "ro.vlc"), "-query", str(DATA / "query.fvecs"),
             "-k", "5", "-rerank", str(DATA / "base.f16"), "-json"],
            check=True, capture_output=True, text=True,
        ).stdout
        got = self.c.search_batch("ro", QUERIES, k=5, rerank=True)
        lines = out.splitlines()
        self.assertEqual(len(lines), len(QUERIES))
        for q, line in enumerate(lines):
            want = json.loads(line)
            self.assertEqual(want["query"], q)
            self.assertEqual([(h.id, h.distance) for h in got[q]],
                             [(w["id"], float(w["distance"])) for w in want["hits"]], f"query {q}")

    def test_rerank_refused(self):
        with self.assertRaises(BadRequest) as cm:
            self.c.search("deep10k", QUERIES[0], rerank=True)  # served without its vectors
        self.assertIn("without its original vectors", cm.exception.message)
        with self.assertRaises(BadRequest) as cm:
            self.c.search("ro", QUERIES[0], rerank_factor=3)
        self.assertIn("rerank_factor without", cm.exception.message)

    def test_read_only_with_originals(self):
        with self.assertRaises(Conflict) as cm:
            Client(SERVER.url, token=TOKEN).add("ro", [("x", [0.0] * DIM)])
        self.assertIn("read-only", cm.exception.message)


class WriteTest(unittest.TestCase):
    """Add, get, delete (with the token) on the index "deep10k"."""

    def setUp(self):
        self.c = Client(SERVER.url, token=TOKEN)

    def test_add_get_delete(self):
        live = self.c.info("deep10k")["live"]
        vs = [bumped(0.5, i) for i in range(5)]
        ids = self.c.add("deep10k", [
            {"id": "w-json", "vector": vs[0], "payload": {"color": "red", "n": 1}},
            ("w-tuple", vs[1], ["a", 2]),
            ("w-bytes", vs[2], b"\x00\xffraw"),
            ("w/slash and space", vs[3]),
            {"vector": vs[4], "payload": "chosen"},  # the index picks the id
        ])
        try:
            self.assertEqual(ids[:4], ["w-json", "w-tuple", "w-bytes", "w/slash and space"])
            self.assertTrue(ids[4])
            self.assertEqual(self.c.info("deep10k")["live"], live + 5)

            self.assertEqual(self.c.get("deep10k", "w-json"), Document("w-json", {"color": "red", "n": 1}))
            self.assertEqual(self.c.get("deep10k", "w-tuple").payload, ["a", 2])
            self.assertEqual(self.c.get("deep10k", "w-bytes").payload, b"\x00\xffraw")
            self.assertEqual(self.c.get("deep10k", "w/slash and space"), Document("w/slash and space", None))
            self.assertEqual(self.c.get("deep10k", ids[4]).payload, "chosen")

            # Each document is the nearest of its own vector, with its payload.
            payloads = [{"color": "red", "n": 1}, ["a", 2], b"\x00\xffraw", None, "chosen"]
            for id_, v, payload in zip(ids, vs, payloads):
                hits = self.c.search("deep10k", v, k=5)
                self.assertEqual(hits[0].id, id_)
                self.assertEqual(hits[0].payload, payload)
                self.assertEqual({h.id for h in hits}, set(ids))
            self.assertTrue(all(h.payload is None for h in self.c.search("deep10k", vs[0], k=5, payloads=False)))
        finally:
            # An id the index does not hold refuses the whole delete (404).
            with self.assertRaises(NotFound) as cm:
                self.c.delete("deep10k", ids + ["never-added"])
            self.assertIn("never-added", cm.exception.message)
            self.assertEqual(self.c.info("deep10k")["live"], live + 5)
            self.assertEqual(self.c.delete("deep10k", ids), 5)
        for id_ in ids:
            with self.assertRaises(NotFound):
                self.c.get("deep10k", id_)
        with self.assertRaises(NotFound):
            self.c.delete("deep10k", ids[:1])  # already deleted
        self.assertFalse({h.id for h in self.c.search("deep10k", vs[0], k=20)} & set(ids))
        self.assertEqual(self.c.info("deep10k")["live"], live)

    def test_where(self):
        vs = [bumped(-0.5, i) for i in range(6)]
        ids = self.c.add("deep10k", [
            (f"c-{i}", vs[i], {"color": "red" if i % 2 else "blue", "n": i}) for i in range(6)
        ])
        try:
            red = self.c.search("deep10k", vs[0], k=10, where={"color": "red"})
            self.assertEqual(sorted(h.id for h in red), ["c-1", "c-3", "c-5"])
            self.assertEqual(self.c.search("deep10k", vs[1], where={"color": "red"})[0].payload,
                             {"color": "red", "n": 1})
            self.assertEqual([h.id for h in self.c.search("deep10k", vs[0], where={"n": 4})], ["c-4"])
            self.assertEqual(self.c.search("deep10k", vs[0], where={"color": "green"}), [])
            batch = self.c.search_batch("deep10k", [vs[0], vs[5]], k=10, where={"color": "blue"})
            self.assertEqual([sorted(h.id for h in r) for r in batch], [["c-0", "c-2", "c-4"]] * 2)
            self.assertEqual(batch[0][0].id, "c-0")
            # The JSON filter's operators.
            for where, want in [
                ({"n": {"$in": [1, 4, 9]}}, ["c-1", "c-4"]),
                ({"n": {"$gte": 2, "$lt": 4}}, ["c-2", "c-3"]),
                ({"$or": [{"n": 0}, {"$and": [{"color": "red"}, {"n": {"$gt": 3}}]}]}, ["c-0", "c-5"]),
                ({"$not": {"n": {"$lte": 4}}, "color": {"$exists": True}}, ["c-5"]),
                # $nin and $ne hold for payloads without the field too.
                ({"color": {"$nin": ["red"], "$exists": True}, "n": {"$ne": 2}}, ["c-0", "c-4"]),
            ]:
                self.assertEqual(sorted(h.id for h in self.c.search("deep10k", vs[0], k=10, where=where)), want, where)
            self.assertEqual(self.c.count("deep10k", where={"color": "red"}), 3)
            with self.assertRaises(BadRequest) as cm:
                self.c.search("deep10k", vs[0], where={"n": {"$between": [1, 2]}})
            self.assertIn("$between", cm.exception.message)
        finally:
            self.c.delete("deep10k", ids)

    def test_duplicate_id(self):
        # An id already in the index: 409 Conflict, naming it; an id twice
        # in one add: 400. Either way nothing is added.
        live = self.c.info("deep10k")["live"]
        self.c.add("deep10k", [("dup", [0.25] * DIM)])
        try:
            with self.assertRaises(Conflict) as cm:
                self.c.add("deep10k", [("dup-new", [0.5] * DIM), ("dup", [0.25] * DIM)])
            self.assertEqual(cm.exception.status, 409)
            self.assertIn('"dup": already in the index', cm.exception.message)
            with self.assertRaises(BadRequest) as cm:
                self.c.add("deep10k", [("twice", [0.5] * DIM), ("twice", [0.75] * DIM)])
            self.assertEqual(cm.exception.status, 400)
            self.assertIn('same id "twice"', cm.exception.message)
            for id_ in ("dup-new", "twice"):
                with self.assertRaises(NotFound):
                    self.c.get("deep10k", id_)
            self.assertEqual(self.c.info("deep10k")["live"], live + 1)
        finally:
            self.c.delete("deep10k", ["dup"])


def unit(dim: int, i: int, scale: float = 1.0):
    """A vector of dim values: 1 at i % dim, scale at (i + 1) % dim."""
    v = [0.0] * dim
    v[i % dim] = 1.0
    v[(i + 1) % dim] = scale
    return v


class CollectionTest(unittest.TestCase):
    """A collection created empty in the server's data folder, written,
    read back page by page, administered and dropped."""

    def setUp(self):
        self.c = Client(SERVER.url, token=TOKEN)

    def test_lifecycle(self):
        info = self.c.create_collection("notes", dim=8, metric="cosine", indexed=["lang"], policy={"train_at": 50})
        self.assertEqual((info["name"], info["dim"], info["metric"], info["live"]), ("notes", 8, "cosine", 0))
        try:
            with self.assertRaises(Conflict):
                self.c.create_collection("notes", dim=8)
            docs = [(f"n{i:02d}", unit(8, i, i / 10), {"lang": ["en", "fr", "de"][i % 3], "n": i}) for i in range(30)]
            self.assertEqual(self.c.add("notes", docs), [d[0] for d in docs])
            self.assertEqual(self.c.count("notes"), 30)
            self.assertEqual(self.c.count("notes", where={"lang": {"$in": ["en", "de"]}}), 20)
            self.assertEqual(self.c.count("notes", filter_ids=["n01", "n02", "nope"]), 2)

            # Upsert replaces n03 (a new vector and payload) and adds n30.
            self.assertEqual(self.c.upsert("notes", [("n03", unit(8, 5), {"lang": "it"}), ("n30", unit(8, 6), None)]), ["n03", "n30"])
            self.assertEqual(self.c.count("notes"), 31)
            self.assertEqual(self.c.get("notes", "n03").payload, {"lang": "it"})
            self.assertEqual(self.c.search("notes", unit(8, 5), k=1, where={"lang": "it"})[0].id, "n03")

            # Payloads replaced and removed without a new vector.
            self.assertEqual(self.c.set_payloads("notes", {"n04": {"lang": "en", "n": 40}, "n05": None, "n06": b"\xff"}), 3)
            self.assertEqual(self.c.get("notes", "n04").payload, {"lang": "en", "n": 40})
            self.assertIsNone(self.c.get("notes", "n05").payload)
            self.assertEqual(self.c.get("notes", "n06").payload, b"\xff")
            with self.assertRaises(NotFound) as cm:
                self.c.set_payloads("notes", [("n07", {"x": 1}), ("nope", {"x": 1})])
            self.assertIn("nope", cm.exception.message)
            self.assertEqual(self.c.get("notes", "n07").payload, {"lang": "fr", "n": 7})

            # Pages in id order, with vectors.
            page = self.c.list_documents("notes", limit=10)
            self.assertEqual([d.id for d in page.documents], [f"n{i:02d}" for i in range(10)])
            self.assertEqual(page.next, "n09")
            self.assertIsNone(page.documents[0].vector)
            ids = [d.id for d in self.c.iter_documents("notes", page_size=7)]
            self.assertEqual(ids, [f"n{i:02d}" for i in range(31)])
            fr = list(self.c.iter_documents("notes", where={"lang": "fr"}, vectors=True))
            self.assertEqual([d.id for d in fr], ["n01", "n07", "n10", "n13", "n16", "n19", "n22", "n25", "n28"])
            for d in fr:
                self.assertEqual(len(d.vector), 8)
                self.assertEqual(d.vector, self.c.get("notes", d.id, vector=True).vector)
            with self.assertRaises(BadRequest):
                self.c.list_documents("notes", limit=-1)

            # A radius keeps the hits within it.
            q = unit(8, 2, 0.2)
            hits = self.c.search("notes", q, k=10)
            radius = hits[2].distance
            within = self.c.search("notes", q, k=10, radius=radius)
            self.assertEqual([h.id for h in within], [h.id for h in hits if h.distance <= radius])
            self.assertGreaterEqual(len(within), 3)

            # Administration answers the description after.
            self.c.delete("notes", ["n00", "n01"])
            info = self.c.compact("notes")
            self.assertEqual((info["live"], info["deleted"]), (29, 0))
            self.assertEqual(self.c.maintain("notes")["live"], 29)
            self.assertEqual(self.c.retrain("notes")["live"], 29)
            snap = self.c.snapshot("notes", "notes-copy")
            self.assertEqual((snap["name"], snap["live"]), ("notes-copy", 29))
            self.assertEqual(self.c.count("notes-copy", where={"lang": "it"}), 1)
            self.c.drop_collection("notes-copy")
            with self.assertRaises(NotFound):
                self.c.info("notes-copy")
        finally:
            self.c.drop_collection("notes")
        self.assertNotIn("notes", [i["name"] for i in self.c.indexes()])

    def test_refused(self):
        with self.assertRaises(Conflict) as cm:
            self.c.drop_collection("ro")  # given on the command line
        self.assertIn("does not drop it", cm.exception.message)
        with self.assertRaises(BadRequest) as cm:
            self.c.create_collection("a b", dim=8)
        self.assertIn("collection name", cm.exception.message)
        with self.assertRaises(BadRequest):
            self.c.create_collection("nodim", dim=0)
        with self.assertRaises(Unauthorized):
            Client(SERVER.url).create_collection("notoken", dim=8)
        with self.assertRaises(ValueError):
            self.c.count("ro", where={"a": 1}, filter_ids=["1"])
        with self.assertRaises(TypeError):
            self.c.create_collection("x", dim=8, indexed="lang")


class ErrorTest(unittest.TestCase):
    def test_no_token(self):
        c = Client(SERVER.url)
        with self.assertRaises(Unauthorized) as cm:
            c.add("deep10k", [("t-none", [0.0] * DIM)])
        self.assertNotIsInstance(cm.exception, Forbidden)
        self.assertEqual(cm.exception.status, 401)
        self.assertIn("bearer token", cm.exception.message)
        with self.assertRaises(Unauthorized):
            c.delete("deep10k", ["0"])

    def test_wrong_token(self):
        c = Client(SERVER.url, token="not-" + TOKEN)
        with self.assertRaises(Forbidden) as cm:
            c.add("deep10k", [("t-wrong", [0.0] * DIM)])
        self.assertIsInstance(cm.exception, Unauthorized)
        self.assertIsInstance(cm.exception, VLCError)
        self.assertEqual(cm.exception.status, 403)
        self.assertEqual(cm.exception.message, "wrong bearer token")
        with self.assertRaises(Forbidden):
            c.delete("deep10k", ["0"])
        with self.assertRaises(NotFound):
            c.get("deep10k", "t-wrong")  # nothing was added
        self.assertEqual(c.get("deep10k", "0").id, "0")  # nor deleted
        for odd in (".", ".."):  # path segments a URL would resolve
            with self.assertRaises(NotFound):
                c.get("deep10k", odd)

    def test_wrong_dimension(self):
        c = Client(SERVER.url, token=TOKEN)
        with self.assertRaises(BadRequest) as cm:
            c.search("ro", [0.0] * (DIM - 1))
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("has 95 values, the index 96", cm.exception.message)
        with self.assertRaises(BadRequest):
            c.search_batch("ro", [[0.0] * DIM, [0.0] * (DIM + 1)])
        with self.assertRaises(BadRequest) as cm:
            c.add("deep10k", [("t-dim", [0.0] * 3)])
        self.assertIn("vector has 3 values", cm.exception.message)

    def test_unknown_index(self):
        c = Client(SERVER.url, token=TOKEN)
        for call in (lambda: c.search("nope", [0.0] * DIM), lambda: c.info("nope"),
                     lambda: c.add("nope", [("x", [0.0] * DIM)]), lambda: c.get("nope", "0")):
            with self.assertRaises(NotFound) as cm:
                call()
            self.assertEqual(cm.exception.status, 404)
            self.assertIn('no index named "nope"', cm.exception.message)

    def test_unknown_document(self):
        with self.assertRaises(NotFound) as cm:
            Client(SERVER.url).get("ro", "no-such-id")
        self.assertEqual(cm.exception.status, 404)

    def test_bad_k_and_nprobe(self):
        c = Client(SERVER.url)
        with self.assertRaises(BadRequest) as cm:
            c.search("ro", QUERIES[0], k=0)
        self.assertIn("k 0", cm.exception.message)
        with self.assertRaises(BadRequest) as cm:
            c.search("ro", QUERIES[0], k=100000)
        self.assertIn("limit", cm.exception.message)
        with self.assertRaises(BadRequest):
            c.search("ro", QUERIES[0], nprobe=-1)

    def test_refused_before_sending(self):
        c = Client(SERVER.url)
        with self.assertRaises(ValueError):
            c.search("ro", [float("nan")] + [0.0] * (DIM - 1))
        with self.assertRaises(TypeError):
            c.search("ro", [[0.0] * DIM])  # a batch given to search
        with self.assertRaises(ValueError):
            Client("127.0.0.1:8080")  # no scheme


class ExampleTest(unittest.TestCase):
    """The README's "Python client" example is example.py, and it runs."""

    def readme_snippet(self) -> str:
        text = (ROOT / "README.md").read_text()
        m = re.search(r"^## Python client\n.*?^```python\n(.*?)^```", text, re.S | re.M)
        self.assertIsNotNone(m, 'README.md has no "## Python client" section with a ```python block')
        return m.group(1)

    def test_readme_is_example(self):
        self.assertEqual(self.readme_snippet(), (PKG / "example.py").read_text(),
                         "README.md's Python client example and clients/python/example.py differ")

    def test_example_runs(self):
        code = (PKG / "example.py").read_text()
        self.assertIn('"http://127.0.0.1:8080"', code)
        self.assertIn('token="s3cret"', code)
        code = code.replace('"http://127.0.0.1:8080"', repr(SERVER.url)).replace('"s3cret"', repr(TOKEN))
        env = dict(os.environ, PYTHONPATH=str(PKG) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("'name': 'deep10k'", lines[0])
        self.assertRegex(lines[1], r"^doc-a 0\.0\d* \{'lang': 'en'\}$")
        self.assertRegex(lines[2], r"^doc-b \d\.\d+ \{'lang': 'fr'\}$")
        self.assertRegex(lines[6], r"^\[Hit\(id='doc-b', distance=\d\.\d+(e-\d+)?, payload=\{'lang': 'fr'\}\)\]$")
        self.assertTrue(lines[7].startswith("[['doc-a', 'doc-b', "), lines[7])
        self.assertTrue(lines[8].startswith("deleted: "), lines[8])


if __name__ == "__main__":
    unittest.main()
