"""Streaming JSON: ``lossless.importers.jsonstream`` (hand-written, over the stdlib's C
scanner) beside ijson (its yajl2_c C backend) on one large ChatGPT export, in one run.

The file is a generated ``conversations.json`` of the shape the importer's tests use
(``--conversations`` conversations, each a mapping of message nodes). Each parser runs in a
fresh process (so peak RSS is its own) and yields the top-level array's elements one by
one; the figures are throughput (MB/s of file), items/s, and the peak RSS above the
process's baseline. The reference is ``json.load`` of the whole file (fast, but holds it
all in memory). A second pass checks that both streaming parsers give identical items (a
digest of each), and ``--property N`` runs a hypothesis property over N random JSON
documents: both parsers yield the same elements, and the same error-or-not.

Also printed: what each says for a truncated file and for garbage in the middle.

Run:  python bench/lib_jsonstream.py [--conversations 50000] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WORDS = ["depot", "van", "parcel", "route", "porto", "lisbon", "driver", "shift", "invoice", "cache", "latency", "export", "retry", "billing", "port", "schema", "index", "vector", "budget", "summary", "window", "token", "message", "tool", "call"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _conversation(rng: random.Random, i: int, nodes: int) -> dict[str, Any]:
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for k in range(nodes):
        role = "user" if k % 2 == 0 else "assistant"
        mapping[f"n{k}"] = {
            "id": f"n{k}", "parent": "root" if k == 0 else f"n{k - 1}",
            "children": [f"n{k + 1}"] if k + 1 < nodes else [],
            "message": {"id": f"n{k}", "author": {"role": role, "name": None, "metadata": {}},
                        "create_time": 1714550400.0 + i * 60 + k, "update_time": None,
                        "content": {"content_type": "text", "parts": [_text(rng, rng.randint(20, 90))]},
                        "status": "finished_successfully", "end_turn": role == "assistant",
                        "weight": 1.0, "metadata": {"model_slug": "gpt-4o", "finish_details": {"type": "stop"}},
                        "recipient": "all"}}
    return {"title": _text(rng, 4), "create_time": 1714550400.0 + i * 60, "update_time": 1714550700.0 + i * 60,
            "conversation_id": f"6630a1b2-0000-4000-8000-{i:012d}", "id": f"6630a1b2-0000-4000-8000-{i:012d}",
            "current_node": f"n{nodes - 1}", "default_model_slug": "gpt-4o", "mapping": mapping,
            "moderation_results": [], "is_archived": False}


def generate(path: Path, conversations: int, seed: int = 7) -> None:
    """Pretty-printed like a real export (indent=2), one array of conversations."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(conversations):
            if i:
                f.write(",\n")
            f.write(json.dumps(_conversation(rng, i, rng.randint(4, 10)), indent=2, ensure_ascii=False))
        f.write("\n]\n")


# -- one parser in one fresh process -------------------------------------------------------

CHILD = r"""
import hashlib, json, resource, sys, time
which, path, digest = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if which == "jsonstream":
    from lossless.importers.jsonstream import iter_document
    def items(f):
        for _, value, _ in iter_document(f):
            yield value
elif which == "ijson":
    import ijson
    def items(f):
        return ijson.items(f, "item", use_float=True)
else:
    def items(f):
        return iter(json.load(f))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
h = hashlib.sha256()
n = 0
t0 = time.perf_counter()
with open(path, "rb") as f:
    for value in items(f):
        n += 1
        if digest:
            h.update(json.dumps(value, sort_keys=True).encode())
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"items": n, "seconds": seconds, "peak_rss_mb": (peak - base) / 1024, "peak_total_mb": peak / 1024,
                  "digest": h.hexdigest() if digest else None}))
"""


def run_child(which: str, path: Path, digest: bool = False) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(path), "1" if digest else "0"],
                         check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# -- the errors each gives ------------------------------------------------------------------

def errors_side_by_side(sample: bytes) -> dict[str, dict[str, str]]:
    import ijson

    from lossless.importers.jsonstream import JsonStreamError, iter_document

    cut = sample[: len(sample) * 2 // 3]
    lines = sample.split(b"\n")
    garbage = b"\n".join([*lines[:40], b'    "broken" 12,', *lines[40:]])
    out: dict[str, dict[str, str]] = {}
    for name, raw in (("truncated", cut), ("garbage", garbage)):
        row: dict[str, str] = {}
        try:
            for _ in iter_document(io.BytesIO(raw)):
                pass
            row["jsonstream"] = "no error"
        except JsonStreamError as exc:
            row["jsonstream"] = f"line {exc.line}: {exc.message}"
        try:
            for _ in ijson.items(io.BytesIO(raw), "item", use_float=True):
                pass
            row["ijson"] = "no error"
        except ijson.JSONError as exc:
            row["ijson"] = " ".join(str(exc).split())
        out[name] = row
    return out


# -- the property: same items from random documents -----------------------------------------

def property_check(examples: int) -> dict[str, Any]:
    import ijson
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from lossless.importers.jsonstream import JsonStreamError, iter_document

    scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text())
    values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4)
                          | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)
    failing: list[str] = []  # hypothesis shrinks towards the smallest document that differs

    def parse_both(raw: bytes) -> tuple[Any, Any]:
        try:
            ours: Any = [v for _, v, _ in iter_document(io.BytesIO(raw))]
        except JsonStreamError as exc:
            ours = f"error: {exc.message}"
        try:
            theirs: Any = list(ijson.items(io.BytesIO(raw), "item", use_float=True))
        except ijson.JSONError as exc:
            theirs = f"error: {' '.join(str(exc).split())[:90]}"
        return ours, theirs

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(values, max_size=6), st.sampled_from([None, 1, 2]), st.booleans())
    def same(doc: list[Any], indent: int | None, ascii_only: bool) -> None:
        raw = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode()
        ours, theirs = parse_both(raw)
        if (ours == "error" or str(ours).startswith("error")) != str(theirs).startswith("error") or (
                not str(ours).startswith("error") and ours != theirs):
            failing.append(f"{raw[:160]!r}: jsonstream={str(ours)[:90]} ijson={str(theirs)[:110]}")
            raise AssertionError(failing[-1])

    with contextlib.suppress(AssertionError):
        same()
    mismatches = failing[-1:]  # the shrunk example
    # the stdlib's json also writes and reads what JSON proper does not have
    extras = {}
    for label, raw in (("NaN", b"[NaN]"), ("Infinity", b"[Infinity]"), ("BOM", b"\xef\xbb\xbf[1]"),
                       ("duplicate keys", b'[{"a": 1, "a": 2}]'), ("big float", b"[1e400]"),
                       ("lone surrogate escape", b'["\\ud800"]')):
        ours, theirs = parse_both(raw)
        extras[label] = {"jsonstream": repr(ours), "ijson": repr(theirs)}
    return {"examples": examples, "mismatches": mismatches, "edge_cases": extras}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--property", type=int, default=500, help="hypothesis examples (0: skip)")
    ap.add_argument("--file", type=Path, help="reuse this generated file")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or Path(tmp) / "conversations.json"
        if not path.exists():
            generate(path, args.conversations)
        mb = path.stat().st_size / 1e6
        print(f"{path.name}: {mb:,.0f} MB, {args.conversations:,} conversations")
        results: dict[str, Any] = {"file_mb": round(mb, 1), "conversations": args.conversations}
        for which in ("json.load", "jsonstream", "ijson"):
            runs = [run_child(which, path) for _ in range(args.repeat)]
            secs = statistics.median(r["seconds"] for r in runs)
            row = {"seconds": round(secs, 2), "mb_per_s": round(mb / secs, 1),
                   "items_per_s": round(runs[0]["items"] / secs), "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
                   "peak_total_mb": round(max(r["peak_total_mb"] for r in runs), 1)}
            results[which] = row
            print(f"  {which:11s} {row['mb_per_s']:7.1f} MB/s  {row['items_per_s']:9,} items/s  "
                  f"peak RSS {row['peak_total_mb']:,.0f} MB (+{row['peak_rss_mb']:,.0f} over the imports)")
        a, b = run_child("jsonstream", path, digest=True), run_child("ijson", path, digest=True)
        results["identical"] = a["digest"] == b["digest"] and a["items"] == b["items"]
        print(f"  identical items: {results['identical']}")
        results["errors"] = errors_side_by_side(path.read_bytes()[:200_000])
        for name, row in results["errors"].items():
            for who, msg in row.items():
                print(f"  {name:9s} {who:10s} {msg[:150]}")
    if args.property:
        results["property"] = property_check(args.property)
        print(f"  property over {args.property} documents: {len(results['property']['mismatches'])} mismatches")
        for m in results["property"]["mismatches"]:
            print("   ", m)
        for label, row in results["property"]["edge_cases"].items():
            print(f"    {label:22s} jsonstream={row['jsonstream'][:40]:42s} ijson={row['ijson'][:60]}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
