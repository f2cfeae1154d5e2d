"""Server-Sent Events parsing: ``lossless.server.sse.SSEParser`` (hand-written, fed the
proxy's copy of the provider's bytes) beside httpx-sse's decoders and the OpenAI SDK's
``SSEDecoder``, in one run.

Correctness: each parser reads the WHATWG event-stream edge cases below (CRLF, lone CR,
comments, multi-line data, ``retry``/``id``-only blocks, a BOM, a cut-off last event,
invalid UTF-8, ...), fed whole and one byte at a time; an answer is the list of
``(event type, data)`` dispatched (the spec's default type ``message`` for none).
Speed: MB/s over a stream of OpenAI chat-completion chunks delivered in 16 KiB reads.
Weight: what each would add to the ``[server]`` extra.

Run:  python bench/lib_sse.py [--mb 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import codecs
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Events = list[tuple[str, str]]

# (name, stream, what the spec says is dispatched)
CASES: list[tuple[str, bytes, Events]] = [
    ("LF", b"data: a\n\n", [("message", "a")]),
    ("CRLF", b"data: a\r\n\r\n", [("message", "a")]),
    ("lone CR", b"data: a\r\r", [("message", "a")]),
    ("mixed line ends", b"data: a\r\ndata: b\rdata: c\n\n", [("message", "a\nb\nc")]),
    ("comments", b": ping\n\ndata: a\n: keep-alive\n\n", [("message", "a")]),
    ("multi-line data", b"data: a\ndata:\ndata:  b\n\n", [("message", "a\n\n b")]),
    ("event type", b"event: delta\ndata: {}\n\n", [("delta", "{}")]),
    ("type resets", b"event: x\ndata: a\n\ndata: b\n\n", [("x", "a"), ("message", "b")]),
    ("retry/id-only blocks", b"retry: 1000\n\nid: 7\n\ndata: a\n\n\n", [("message", "a")]),
    ("BOM", b"\xef\xbb\xbfdata: a\n\n", [("message", "a")]),
    ("cut-off last event", b"data: a\n\ndata: b", [("message", "a")]),
    ("field without colon", b"data\n\n", [("message", "")]),
    ("no space after colon", b"data:a\n\n", [("message", "a")]),
    ("unknown field", b"foo: bar\ndata: a\n\n", [("message", "a")]),
    ("invalid UTF-8", b"data: \xff\n\n", [("message", "\ufffd")]),
    ("multibyte", "data: 汉字 ✓\n\n".encode(), [("message", "汉字 ✓")]),
]


def ours(chunks: Iterator[bytes]) -> Events:
    from lossless.server.sse import SSEParser

    parser = SSEParser()
    out: Events = []
    for chunk in chunks:
        out.extend((e.event or "message", e.data) for e in parser.feed(chunk))
    return out


def httpx_sse(chunks: Iterator[bytes]) -> Events:
    # EventSource wants the httpx.Response itself; the proxy relays the bytes, so a copy
    # needs the (private) decoders fed text as httpx would give it
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    text = codecs.getincrementaldecoder("utf-8")("replace")
    lines, decoder = SSELineDecoder(), SSEDecoder()
    out: Events = []
    for chunk in chunks:
        for line in lines.decode(text.decode(chunk)):
            sse = decoder.decode(line)
            if sse is not None:
                out.append((sse.event or "message", sse.data))
    for line in lines.flush():  # at the end of the stream: a held-back CR ends its line
        sse = decoder.decode(line)
        if sse is not None:
            out.append((sse.event or "message", sse.data))
    return out


def openai_sdk(chunks: Iterator[bytes]) -> Events:
    from openai._streaming import SSEDecoder

    return [(sse.event or "message", sse.data) for sse in SSEDecoder().iter_bytes(chunks)]


PARSERS: dict[str, Callable[[Iterator[bytes]], Events]] = {
    "lossless.server.sse": ours, "httpx-sse 0.4": httpx_sse, "openai SDK": openai_sdk}


def run(parser: Callable[[Iterator[bytes]], Events], raw: bytes, bytewise: bool) -> Events | str:
    chunks = (raw[i:i + 1] for i in range(len(raw))) if bytewise else iter([raw])
    try:
        return parser(chunks)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def openai_stream(mb: float) -> bytes:
    parts = []
    size = 0
    i = 0
    while size < mb * 1e6:
        chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1714550400, "model": "gpt-4o",
                 "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]}
        line = f"data: {json.dumps(chunk)}\n\n".encode()
        parts.append(line)
        size += len(line)
        i += 1
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name, parser in PARSERS.items():
        failed = []
        for case, raw, expected in CASES:
            for bytewise in (False, True):
                got = run(parser, raw, bytewise)
                if got != expected:
                    failed.append({"case": case, "bytewise": bytewise, "got": got})
        stream = openai_stream(args.mb)
        reads = [stream[i:i + 16384] for i in range(0, len(stream), 16384)]
        t0 = time.perf_counter()
        events = parser(iter(reads))
        secs = time.perf_counter() - t0
        results[name] = {"cases_passed": len(CASES) * 2 - len(failed), "cases": len(CASES) * 2,
                         "failed": failed, "mb_per_s": round(len(stream) / 1e6 / secs, 1), "events": len(events)}
        print(f"{name:20s} {len(CASES) * 2 - len(failed):2d}/{len(CASES) * 2} edge cases  "
              f"{results[name]['mb_per_s']:6.1f} MB/s ({len(events):,} events)")
        for f in failed:
            print(f"    {f['case']}{' (byte by byte)' if f['bytewise'] else ''}: {f['got']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
