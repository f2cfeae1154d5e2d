"""Request validation: the hand-written ``server/params.py`` (+ ``core/validate.py`` and
``server/openapi.py``) beside pydantic v2 models of the same request bodies, in one run.

Pydantic is measured as it would have to be used to keep today's behaviour: strict types
(``"5"`` is not an integer, ``1`` is not ``true``), unknown fields refused
(``extra="forbid"``), the same bounds and choices. The prototype models below declare the
five commonest bodies (assemble, search, create conversation, compact, add messages).

Figures:
- import time (median wall time of ``--runs`` fresh ``python -c "import …"`` processes) and
  peak RSS of ``lossless`` (what the CLI and every script pay), ``lossless.server.app`` and
  ``lossless.server.app`` plus pydantic and the prototype models;
- build: ``create_app()`` and ``openapi_document()`` today, beside defining the models
  and generating their JSON schemas;
- per request: validating each body (good and bad) with ``Fields`` as the routes do,
  beside ``Model.model_validate``; and the same against the round trip of the server
  benchmark (``bench/bench_server.py``'s p50 assemble, passed with ``--request-ms``);
- the error each gives for the same bad bodies (today's are pinned by tests).

Run:  python bench/lib_validation.py [--runs 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROTOTYPE = r'''
from typing import Annotated, Any, Literal
from pydantic import BaseModel, ConfigDict, Field

class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

class AssembleRequest(Body):
    budget_tokens: Annotated[int, Field(ge=1, description="default: the context window")] | None = None
    query: Annotated[str, Field(description="recall older messages that match it")] | None = None

class SearchRequest(Body):
    query: str
    mode: Literal["fts", "raw", "regex", "semantic", "hybrid"] = "fts"
    scope: Literal["all", "messages", "summaries"] = "all"
    role: Literal["system", "user", "assistant", "tool"] | None = None
    since: str | None = None
    until: str | None = None
    sort: Literal["relevance", "recency"] = "relevance"
    limit: Annotated[int, Field(ge=1, le=1000)] = 20

class CreateConversation(Body):
    id: str
    metadata: dict[str, Any] | None = None

class CompactRequest(Body):
    full: bool = False
    emergency: bool = False
    force: bool = True

class AddMessages(Body):
    messages: Annotated[list[dict[str, Any]], Field(min_length=1)]
    metadata: dict[str, Any] | None = None
    compact: bool = True

MODELS = [AssembleRequest, SearchRequest, CreateConversation, CompactRequest, AddMessages]
'''

GOOD = {
    "AssembleRequest": {"budget_tokens": 4096, "query": "which port did billing move to"},
    "SearchRequest": {"query": "ERR_4242 retry", "mode": "fts", "limit": 10, "role": "user"},
    "CreateConversation": {"id": "c1", "metadata": {"user": "ana"}},
    "CompactRequest": {"full": True},
    "AddMessages": {"messages": [{"role": "user", "content": "hello"}], "compact": False},
}
BAD = [
    ("AssembleRequest", {"budget_tokens": "5"}),
    ("AssembleRequest", {"budget_tokens": 0}),
    ("AssembleRequest", {"budget": 10}),
    ("SearchRequest", {"mode": "fts"}),
    ("SearchRequest", {"query": "x", "mode": "fuzzy"}),
    ("SearchRequest", {"query": "x", "limit": 5000}),
    ("CompactRequest", {"full": 1}),
    ("CreateConversation", {"id": 7}),
    ("AddMessages", {"messages": []}),
]


def hand_validate(model: str, body: dict[str, Any]) -> Any:
    """What the routes do today with ``Fields``."""
    from lossless.server.params import Fields, bad

    if model == "AssembleRequest":
        f = Fields(body, allowed=("budget_tokens", "query"))
        return f.integer("budget_tokens", minimum=1), f.string("query")
    if model == "SearchRequest":
        f = Fields(body, allowed=("query", "mode", "scope", "role", "since", "until", "sort", "limit"))
        return (f.text("query"), f.string("mode", default="fts", choices=("fts", "raw", "regex", "semantic", "hybrid")),
                f.string("scope", default="all", choices=("all", "messages", "summaries")),
                f.string("role", choices=("system", "user", "assistant", "tool")), f.string("since"), f.string("until"),
                f.string("sort", default="relevance", choices=("relevance", "recency")),
                f.integer("limit", default=20, minimum=1, maximum=1000))
    if model == "CreateConversation":
        f = Fields(body, allowed=("id", "metadata"))
        return f.text("id"), f.mapping("metadata")
    if model == "CompactRequest":
        f = Fields(body, allowed=("full", "emergency", "force"))
        return f.boolean("force", default=True), f.boolean("full"), f.boolean("emergency")
    f = Fields(body, allowed=("messages", "metadata", "compact"))
    items = f.data.get("messages")
    if not isinstance(items, list) or not items:
        raise bad("'messages' must be a non-empty list of message objects (or send one message as the body)")
    return items, f.mapping("metadata"), f.boolean("compact", default=True)


def pydantic_message(exc: Any) -> str:
    """The best one-line message pydantic's structured errors give without a hand-written
    table per error type: the field's path and pydantic's own text."""
    parts = []
    for e in exc.errors(include_url=False):
        where = ".".join(str(p) for p in e["loc"]) or "body"
        parts.append(f"{where!r}: {e['msg']}")
    return "; ".join(parts)


# -- import time in fresh processes --------------------------------------------------------

IMPORT_CHILD = r"""
import resource, sys, time, json
t0 = time.perf_counter()
exec(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _import_once(code: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", IMPORT_CHILD, code], check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def import_costs(imports: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    """Round-robin over the variants (so a busy moment on a shared machine hits all of
    them), median of ``runs`` each."""
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in imports}
    for _ in range(runs):
        for label, code in imports.items():
            samples[label].append(_import_once(code))
    return {label: {"ms": round(statistics.median(r["seconds"] for r in rows) * 1000, 1),
                    "rss_mb": round(statistics.median(r["rss_mb"] for r in rows), 1)}
            for label, rows in samples.items()}


def per_call_us(fn: Any, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return round(best * 1e6, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--request-ms", type=float, default=None,
                    help="p50 of one request from bench_server.py, to show validation's share")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: dict[str, Any] = {}

    proto = Path(__file__).parent / "_pydantic_prototype.py"
    proto.write_text(PROTOTYPE, encoding="utf-8")
    sys.path.insert(0, str(proto.parent))
    try:
        print("import (median of fresh processes):")
        imports = {
            "nothing (the interpreter)": "pass",
            "lossless": "import lossless",
            "lossless.cli": "import lossless.cli",
            "pydantic": "import pydantic",
            "lossless.server.app": "import lossless.server.app",
            "lossless.server.app + pydantic models": f"import sys; sys.path.insert(0, {str(proto.parent)!r}); "
                                                     "import lossless.server.app, _pydantic_prototype",
        }
        results["import"] = import_costs(imports, args.runs)
        for label, row in results["import"].items():
            print(f"  {label:40s} {row['ms']:7.1f} ms  peak RSS {row['rss_mb']:6.1f} MB")

        from lossless.server.app import create_app
        from lossless.server.openapi import openapi_document

        t0 = time.perf_counter()
        import _pydantic_prototype as prototype
        import pydantic  # noqa: F401  (first import, timed with the models)
        define_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        for m in prototype.MODELS:
            m.model_json_schema()
        schema_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        openapi_document()
        doc_ms = (time.perf_counter() - t0) * 1000
        import lossless
        mem = lossless.open(":memory:", embedder=None)
        t0 = time.perf_counter()
        create_app(mem)
        app_ms = (time.perf_counter() - t0) * 1000
        mem.close()
        results["build"] = {"create_app_ms": round(app_ms, 2), "openapi_document_ms": round(doc_ms, 2),
                            "pydantic_import_and_define_5_models_ms": round(define_ms, 2),
                            "pydantic_5_json_schemas_ms": round(schema_ms, 2)}
        print("build:", results["build"])

        models = {m.__name__: m for m in prototype.MODELS}
        results["per_request_us"] = {}
        print("per body (best of 5, µs):")
        for name, body in GOOD.items():
            hand = per_call_us(lambda n=name, b=body: hand_validate(n, b), 20_000)
            pyd = per_call_us(lambda n=name, b=body: models[n].model_validate(b), 20_000)
            results["per_request_us"][name] = {"hand": hand, "pydantic": pyd}
            print(f"  {name:20s} hand {hand:6.2f}  pydantic {pyd:6.2f}")
        if args.request_ms:
            worst = max(abs(r["pydantic"] - r["hand"]) for r in results["per_request_us"].values())
            results["share_of_request"] = round(worst / (args.request_ms * 1000), 5)
            print(f"  largest difference is {results['share_of_request']:.3%} of a {args.request_ms} ms request")

        from pydantic import ValidationError as PydanticError

        from lossless.server.errors import HTTPError
        results["errors"] = []
        print("errors for the same bad bodies:")
        for name, body in BAD:
            try:
                hand_validate(name, body)
                hand_msg = "accepted"
            except HTTPError as exc:
                hand_msg = exc.message
            try:
                models[name].model_validate(body)
                pyd_msg = "accepted"
            except PydanticError as exc:
                pyd_msg = pydantic_message(exc)
            results["errors"].append({"body": body, "hand": hand_msg, "pydantic": pyd_msg})
            print(f"  {json.dumps(body)}\n     hand:     {hand_msg}\n     pydantic: {pyd_msg}")
    finally:
        proto.unlink()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
