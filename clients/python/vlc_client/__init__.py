"""A small client for `vlc serve`, the HTTP server of vlc indexes.

Standard library only (urllib, json); numpy is optional: vectors may be
numpy arrays as well as lists (or tuples) of numbers, and `as_arrays`
turns batch results into arrays. Everything else comes back as plain
Python values: hits as `Hit`, documents as `Document`, index
descriptions as dicts.

    from vlc_client import Client
    client = Client("http://127.0.0.1:8080", token="s3cret")
    hits = client.search("deep10k", [0.0] * 96, k=5)

Errors the server answers (4xx, 5xx) raise a subclass of `VLCError`
carrying the status and the server's message; a server that cannot be
reached raises `ConnectionFailed` (status None).
"""

from __future__ import annotations

import base64
import json
import math
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "Client",
    "Hit",
    "Document",
    "Page",
    "as_arrays",
    "VLCError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "PayloadTooLarge",
    "ServerError",
    "ConnectionFailed",
]

__version__ = "0.1.0"


# --- errors -----------------------------------------------------------------


class VLCError(Exception):
    """An error from the server: `status` is the HTTP status (None when
    the server could not be reached) and `message` the server's own
    message (its JSON "error")."""

    def __init__(self, status: Optional[int], message: str):
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}" if status is not None else message)


class BadRequest(VLCError):
    """400: the request was refused (wrong dimension, bad k, over a limit,
    an id given twice in one add, a re-rank the index is not served for...)."""


class Unauthorized(VLCError):
    """401: a write without the bearer token (Forbidden, 403, is a subclass:
    a wrong token)."""


class Forbidden(Unauthorized):
    """403: the bearer token is wrong."""


class NotFound(VLCError):
    """404: no such index, document or endpoint."""


class Conflict(VLCError):
    """409: the index's state refuses the write: an id already in the index
    (add), an index served read-only (with its original vectors, for
    re-ranking), or one locked by another writer; a collection name taken,
    a server without a data folder (vlc serve -data DIR), or a drop of an
    index given on the command line."""


class PayloadTooLarge(VLCError):
    """413: the request body is over the server's limit."""


class ServerError(VLCError):
    """5xx (and any other status not named above)."""


class ConnectionFailed(VLCError):
    """The server could not be reached, or did not answer in time (status None)."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: PayloadTooLarge}


def _error_for(status: int, message: str) -> VLCError:
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = BadRequest if 400 <= status < 500 else ServerError
    return cls(status, message)


# --- values -----------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One search hit. `payload` is the stored payload: the decoded JSON
    value when it is JSON, bytes when it is not, None when there is none
    (or payloads were not asked for)."""

    id: str
    distance: float
    payload: Any = None


@dataclass(frozen=True)
class Document:
    """A stored document as `get` and `list_documents` return it: its id,
    payload (as in Hit) and, when asked for, its vector as the index's
    code gives it back (not the vector added; None otherwise)."""

    id: str
    payload: Any = None
    vector: Optional[List[float]] = None


@dataclass(frozen=True)
class Page:
    """A page of `list_documents`: its documents, and `next`, the `after`
    of the next page (None after the last)."""

    documents: List[Document]
    next: Optional[str] = None


def _payload_of(body: Mapping[str, Any]) -> Any:
    if "payload" in body:
        return body["payload"]
    if "payload_base64" in body:
        return base64.b64decode(body["payload_base64"])
    return None


def _hit(body: Mapping[str, Any]) -> Hit:
    return Hit(id=body["id"], distance=float(body["distance"]), payload=_payload_of(body))


# --- vectors ----------------------------------------------------------------


def _vector(v: Any, what: str = "vector") -> List[float]:
    """A vector (numpy array, list or tuple of numbers) as a list of
    finite floats."""
    if hasattr(v, "tolist"):  # numpy arrays and scalars
        v = v.tolist()
    if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
        raise TypeError(f"{what}: want a sequence of numbers, got {type(v).__name__}")
    out = []
    for j, x in enumerate(v):
        if isinstance(x, (list, tuple)):
            raise TypeError(f"{what}: value {j} is a sequence: give one vector (search_batch takes many)")
        f = float(x)
        if not math.isfinite(f):
            raise ValueError(f"{what}, value {j} is {f}: vectors must be finite")
        out.append(f)
    return out


def _segment(p: str) -> str:
    """A URL path segment for p: percent-encoded, and "." and ".." (which
    quote leaves alone, and which a URL would resolve) as %2E."""
    q = urllib.parse.quote(p, safe="")
    return q.replace(".", "%2E") if q in (".", "..") else q


def _is_float_array(vs: Any) -> bool:
    """Whether vs is a 2-D numpy array of floats with at least one column
    (sent as vectors_f32)."""
    return getattr(vs, "ndim", None) == 2 and getattr(getattr(vs, "dtype", None), "kind", "") == "f" and vs.shape[1] > 0


def _vectors(vs: Any) -> List[List[float]]:
    """A batch of vectors (2-D numpy array, or a sequence of vectors)."""
    if hasattr(vs, "tolist") and getattr(vs, "ndim", 2) != 2:
        raise ValueError(f"vectors: want a 2-D array, got {vs.ndim} dimensions")
    if hasattr(vs, "tolist"):
        vs = vs.tolist()
    return [_vector(v, f"vector {i}") for i, v in enumerate(vs)]


def as_arrays(results: Sequence[Sequence[Hit]], k: Optional[int] = None):
    """Batch results (from search_batch) as numpy arrays (ids, distances),
    each of shape (queries, k): ids of dtype object, distances float32.
    Rows with fewer than k hits (k defaults to the longest row) are padded
    with id None and distance inf. Needs numpy."""
    import numpy as np

    if k is None:
        k = max((len(r) for r in results), default=0)
    ids = np.full((len(results), k), None, dtype=object)
    dist = np.full((len(results), k), np.inf, dtype=np.float32)
    for i, row in enumerate(results):
        for j, h in enumerate(row[:k]):
            ids[i, j] = h.id
            dist[i, j] = h.distance
    return ids, dist


# --- the client -------------------------------------------------------------

DocumentLike = Union[Mapping[str, Any], Tuple[Any, ...]]


class Client:
    """A client of one `vlc serve` server.

    url: the server's base URL, e.g. "http://127.0.0.1:8080".
    token: the bearer token, sent with every request (the server asks for
    it on writes and administration: add, upsert, set_payloads, delete,
    create_collection, drop_collection, compact, retrain, snapshot,
    maintain).
    timeout: seconds to wait for each request.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"url {url!r}: want http://HOST:PORT or https://HOST:PORT")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Client({self.url!r}, token={'***' if self.token else None}, timeout={self.timeout})"

    # -- transport --

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
                ctype = resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace").strip() or e.reason
            raise _error_for(e.code, message) from None
        except (urllib.error.URLError, socket.timeout, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectionFailed(None, f"{method} {self.url}{path}: {reason}") from e
        if ctype.startswith("application/json"):
            return json.loads(raw)
        return raw.decode("utf-8", "replace")

    def _index_path(self, index: str, *rest: str) -> str:
        parts = ["v1", "indexes", index, *rest]
        return "/" + "/".join(_segment(p) for p in parts)

    # -- health --

    def health(self) -> bool:
        """Whether the server answers /healthz (False when it cannot be
        reached or answers otherwise)."""
        try:
            self._request("GET", "/healthz")
            return True
        except VLCError:
            return False

    def ready(self) -> bool:
        """Whether every index is readable (/readyz)."""
        try:
            self._request("GET", "/readyz")
            return True
        except VLCError:
            return False

    # -- reads --

    def indexes(self) -> List[Dict[str, Any]]:
        """The indexes served, each described as by info."""
        return self._request("GET", "/v1/indexes")

    def info(self, index: str) -> Dict[str, Any]:
        """An index's description: name, dim, metric, lists, live, deleted,
        bytes, segments, drift."""
        return self._request("GET", self._index_path(index))

    def _search_body(self, k, nprobe, filter_ids, where, payloads, rerank, rerank_factor, radius=None) -> Dict[str, Any]:
        body: Dict[str, Any] = {}
        if radius is not None:
            body["radius"] = float(radius)
        if k is not None:
            body["k"] = int(k)
        if nprobe is not None:
            body["nprobe"] = int(nprobe)
        if rerank:
            body["rerank"] = True
        if rerank_factor is not None:
            body["rerank_factor"] = int(rerank_factor)  # without rerank: the server's BadRequest
        if filter_ids is not None and where is not None:
            raise ValueError("give filter_ids or where, not both")
        if filter_ids is not None:
            if isinstance(filter_ids, str):
                raise TypeError("filter_ids: want a list of ids, got one string")
            # An empty list allows nothing (the callers answer without
            # asking: the server would take it as no filter at all).
            body["filter"] = {"ids": [str(i) for i in filter_ids]}
        elif where is not None:
            body["where"] = _where(where)
        if not payloads:
            body["payloads"] = False
        return body

    def search(
        self,
        index: str,
        vector: Any,
        k: Optional[int] = None,
        nprobe: Optional[int] = None,
        filter_ids: Optional[Iterable[str]] = None,
        where: Optional[Mapping[str, Any]] = None,
        payloads: bool = True,
        rerank: bool = False,
        rerank_factor: Optional[int] = None,
        radius: Optional[float] = None,
    ) -> List[Hit]:
        """The nearest documents of one vector, nearest first.

        k: hits (server default 10); nprobe: lists scanned (default 16);
        filter_ids: only these ids (an empty list: no hits); where: only
        documents whose payload the filter allows, in the JSON syntax of
        Chroma and MongoDB: {"lang": "fr"}, {"lang": {"$in": ["en", "fr"]}},
        {"year": {"$gte": 2020, "$lt": 2024}}, {"$or": [...]}, with $eq,
        $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $and, $or, $not
        (a bad filter raises BadRequest naming the problem); radius: drop
        the hits farther than this distance (at most k still come back);
        payloads: return each hit's payload; rerank: re-score
        the best rerank_factor * k candidates (server default factor 10)
        exactly against the index's original vectors and return the best
        k of those, with exact distances (the server must hold them:
        `vlc serve -rerank NAME=FILE`; an index served without them
        raises BadRequest)."""
        body = self._search_body(k, nprobe, filter_ids, where, payloads, rerank, rerank_factor, radius)
        body["vector"] = _vector(vector)
        if body.get("filter") == {"ids": []}:
            return []
        resp = self._request("POST", self._index_path(index, "search"), body)
        return [_hit(h) for h in resp.get("hits") or []]

    def search_batch(
        self,
        index: str,
        vectors: Any,
        k: Optional[int] = None,
        nprobe: Optional[int] = None,
        filter_ids: Optional[Iterable[str]] = None,
        where: Optional[Mapping[str, Any]] = None,
        payloads: bool = True,
        rerank: bool = False,
        rerank_factor: Optional[int] = None,
        radius: Optional[float] = None,
    ) -> List[List[Hit]]:
        """The nearest documents of each vector (a 2-D numpy array or a
        list of vectors): one list of hits per vector, in order. The
        options are search's."""
        body = self._search_body(k, nprobe, filter_ids, where, payloads, rerank, rerank_factor, radius)
        if _is_float_array(vectors):
            # A numpy batch goes as base64 float32 bytes ("vectors_f32"):
            # no numbers to print here or parse there.
            import numpy as np

            a = np.ascontiguousarray(vectors, dtype="<f4")
            if not np.isfinite(a).all():
                bad = np.argwhere(~np.isfinite(a))[0]
                raise ValueError(f"vector {bad[0]}, value {bad[1]} is {a[tuple(bad)]}: vectors must be finite")
            n = a.shape[0]
            if n == 0:
                return []
            if body.get("filter") == {"ids": []}:
                return [[] for _ in range(n)]
            body["vectors_f32"] = base64.b64encode(a.tobytes()).decode("ascii")
        else:
            body["vectors"] = _vectors(vectors)
            if not body["vectors"]:
                return []
            if body.get("filter") == {"ids": []}:
                return [[] for _ in body["vectors"]]
        resp = self._request("POST", self._index_path(index, "search"), body)
        results = resp.get("results") or []
        return [[_hit(h) for h in row or []] for row in results]

    def get(self, index: str, id: str, vector: bool = False) -> Document:
        """A document's id and payload, and its vector when vector is True
        (NotFound when the index has no such id)."""
        path = self._index_path(index, "documents", str(id))
        if vector:
            path += "?vector=true"
        return _document(self._request("GET", path))

    def count(self, index: str, where: Optional[Mapping[str, Any]] = None, filter_ids: Optional[Iterable[str]] = None) -> int:
        """The number of documents, or of those a filter allows (where, in
        search's JSON syntax, or filter_ids; not both)."""
        return self._request("POST", self._index_path(index, "count"), _filter_body(where, filter_ids))["count"]

    def list_documents(
        self,
        index: str,
        after: Optional[str] = None,
        limit: Optional[int] = None,
        where: Optional[Mapping[str, Any]] = None,
        filter_ids: Optional[Iterable[str]] = None,
        vectors: bool = False,
    ) -> Page:
        """A page of documents in byte order of their ids: those after the
        id `after` (None: from the first), at most `limit` (server default
        100, at most its batch limit), those a filter allows, with their
        vectors when `vectors` is True. Page.next is the `after` of the
        next page, None after the last."""
        body = _filter_body(where, filter_ids)
        if after:
            body["after"] = str(after)
        if limit is not None:
            body["limit"] = int(limit)
        if vectors:
            body["vectors"] = True
        resp = self._request("POST", self._index_path(index, "list"), body)
        return Page(documents=[_document(d) for d in resp.get("documents") or []], next=resp.get("next") or None)

    def iter_documents(self, index: str, where: Optional[Mapping[str, Any]] = None, vectors: bool = False, page_size: Optional[int] = None):
        """Every document a filter allows (all without one), page after page
        (list_documents), in byte order of their ids."""
        after = None
        while True:
            page = self.list_documents(index, after=after, limit=page_size, where=where, vectors=vectors)
            yield from page.documents
            if page.next is None:
                return
            after = page.next

    # -- writes (need the token when the server has one) --

    def add(self, index: str, documents: Iterable[DocumentLike]) -> List[str]:
        """Add documents and return their ids, in order. Each document is a
        dict {"id", "vector", "payload"} or a tuple (id, vector) or (id,
        vector, payload). An id of None or "" lets the index pick one. A
        payload is any JSON value, or bytes (stored as they are). The add
        is committed to disk before the server answers. An id already in
        the index raises Conflict (409) naming it, an id given twice
        BadRequest (400); either way nothing is added."""
        docs = [_document_body(d, i) for i, d in enumerate(documents)]
        if not docs:
            return []
        return self._request("POST", self._index_path(index, "documents"), {"documents": docs})["ids"]

    def delete(self, index: str, ids: Iterable[str]) -> int:
        """Delete documents by id; returns the number deleted. An id the
        index does not hold raises NotFound naming it, and then nothing is
        deleted."""
        if isinstance(ids, str):
            raise TypeError("ids: want a list of ids, got one string")
        ids = [str(i) for i in ids]
        if not ids:
            return 0
        resp = self._request("POST", self._index_path(index, "delete"), {"ids": ids})
        return resp["deleted"] if "deleted" in resp else resp["requested"]  # "requested": older servers


    def upsert(self, index: str, documents: Iterable[DocumentLike]) -> List[str]:
        """add, except that a document whose id the index holds replaces it
        (the old and the new one are never both, or neither, found)."""
        docs = [_document_body(d, i) for i, d in enumerate(documents)]
        if not docs:
            return []
        return self._request("POST", self._index_path(index, "upsert"), {"documents": docs})["ids"]

    def set_payloads(self, index: str, payloads: Union[Mapping[str, Any], Iterable[Tuple[str, Any]]]) -> int:
        """Replace the payloads of documents by id, without encoding their
        vectors again: a dict of id to payload, or (id, payload) pairs; a
        payload of None removes it, bytes are stored as they are. Returns
        the number updated. An id the index does not hold raises NotFound
        naming it, and then nothing changes."""
        items = payloads.items() if isinstance(payloads, Mapping) else payloads
        docs = []
        for i, (id_, payload) in enumerate(items):
            if id_ is None or id_ == "":
                raise ValueError(f"payload {i}: no id")
            d: Dict[str, Any] = {"id": str(id_)}
            if isinstance(payload, (bytes, bytearray, memoryview)):
                d["payload_base64"] = base64.b64encode(bytes(payload)).decode("ascii")
            elif payload is not None:
                d["payload"] = payload
            docs.append(d)
        if not docs:
            return 0
        return self._request("POST", self._index_path(index, "payloads"), {"documents": docs})["updated"]

    # -- collections and administration (need the token) --

    def create_collection(
        self,
        name: str,
        dim: int,
        metric: Optional[str] = None,
        code: Optional[str] = None,
        bits: Optional[int] = None,
        subspaces: Optional[int] = None,
        ratio: Optional[float] = None,
        seed: Optional[int] = None,
        indexed: Optional[Iterable[str]] = None,
        policy: Optional[Mapping[str, Any]] = None,
    ) -> Dict[str, Any]:
        """Create an empty collection in the server's data folder (vlc serve
        -data DIR) and return its description. metric: "l2" (default),
        "ip" or "cosine"; code, bits, subspaces or ratio: the code it
        trains to; indexed: payload fields (dotted paths) kept in an index
        for filters; policy: {"train_at", "retrain_growth", "retrain_drift",
        "merge_factor"} (0: the default, -1: never). A name taken, or a
        server without a data folder, raises Conflict."""
        body: Dict[str, Any] = {"name": str(name), "dim": int(dim)}
        for key, value in (("metric", metric), ("code", code), ("bits", bits), ("subspaces", subspaces),
                           ("ratio", ratio), ("seed", seed)):
            if value is not None:
                body[key] = value
        if indexed is not None:
            if isinstance(indexed, str):
                raise TypeError("indexed: want a list of field names, got one string")
            body["indexed"] = [str(f) for f in indexed]
        if policy is not None:
            body["policy"] = dict(policy)
        return self._request("POST", "/v1/indexes", body)

    def drop_collection(self, name: str) -> None:
        """Drop a collection of the data folder: the server stops serving it
        and removes its files. An index given on the command line raises
        Conflict."""
        self._request("DELETE", self._index_path(name))

    def compact(self, index: str) -> Dict[str, Any]:
        """Drop deleted rows and merge segments; returns the description after."""
        return self._request("POST", self._index_path(index, "compact"))

    def retrain(self, index: str) -> Dict[str, Any]:
        """Train new anchors from the live vectors; returns the description after."""
        return self._request("POST", self._index_path(index, "retrain"))

    def maintain(self, index: str) -> Dict[str, Any]:
        """Run the background work that is due now (merges, training): for a
        server run with -maintain=false. Returns the description after."""
        return self._request("POST", self._index_path(index, "maintain"))

    def snapshot(self, index: str, name: str) -> Dict[str, Any]:
        """Copy the index's current version into a new collection `name` of
        the data folder, which the server then serves; returns its
        description."""
        return self._request("POST", self._index_path(index, "snapshot"), {"name": str(name)})


def _where(where: Mapping[str, Any]) -> Dict[str, Any]:
    if not isinstance(where, Mapping):
        raise TypeError(f"where: want a dict (a JSON filter), got {type(where).__name__}")
    return dict(where)


def _filter_body(where: Optional[Mapping[str, Any]], filter_ids: Optional[Iterable[str]]) -> Dict[str, Any]:
    if where is not None and filter_ids is not None:
        raise ValueError("give filter_ids or where, not both")
    if where is not None:
        return {"where": _where(where)}
    if filter_ids is not None:
        if isinstance(filter_ids, str):
            raise TypeError("filter_ids: want a list of ids, got one string")
        return {"filter": {"ids": [str(i) for i in filter_ids]}}
    return {}


def _document(body: Mapping[str, Any]) -> Document:
    return Document(id=body["id"], payload=_payload_of(body), vector=body.get("vector"))


def _document_body(d: DocumentLike, i: int) -> Dict[str, Any]:
    if isinstance(d, Mapping):
        unknown = set(d) - {"id", "vector", "payload"}
        if unknown:
            raise ValueError(f"document {i}: unknown keys {sorted(unknown)} (want id, vector, payload)")
        if "vector" not in d:
            raise ValueError(f"document {i}: no vector")
        id_, vector, payload = d.get("id"), d["vector"], d.get("payload")
    elif isinstance(d, (tuple, list)) and len(d) in (2, 3):
        id_, vector = d[0], d[1]
        payload = d[2] if len(d) == 3 else None
    else:
        raise TypeError(f"document {i}: want a dict or a tuple (id, vector[, payload]), got {type(d).__name__}")
    body: Dict[str, Any] = {"vector": _vector(vector, f"document {i}: vector")}
    if id_ is not None and id_ != "":
        body["id"] = str(id_)
    if isinstance(payload, (bytes, bytearray, memoryview)):
        body["payload_base64"] = base64.b64encode(bytes(payload)).decode("ascii")
    elif payload is not None:
        body["payload"] = payload
    return body
