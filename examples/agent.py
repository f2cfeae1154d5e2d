"""A small coding-assistant agent with lossless memory, in about a hundred lines.

Every turn goes through ``conv.turn``: long-term memories and the context for the window
are assembled, the model is called with tools (this file's ``list_files`` / ``read_file``
/ ``word_count``, plus lossless's own ``lcm_grep`` / ``lcm_describe`` / ``lcm_expand`` to
look further back than the window), and everything is stored, compacted when due.

Run it against any OpenAI-compatible endpoint::

    export OPENAI_API_KEY=sk-...                      # or OPENAI_BASE_URL=http://localhost:11434/v1 (Ollama)
    python examples/agent.py --model gpt-4o-mini      # interactive; /compact, /quit
    python examples/agent.py --model gpt-4o-mini --once "What is in README.md?"

State lives in ``--db`` (default ``agent.db``), so a later run remembers earlier ones.
The test suite drives it against a local fake server (``tests/test_example_agent.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import lossless

ROOT = Path.cwd()


def _inside(path: str) -> Path:
    target = (ROOT / path).resolve()
    if not target.is_relative_to(ROOT.resolve()):
        raise ValueError(f"{path} is outside the workspace {ROOT}")
    return target


def list_files(directory: str = ".") -> list[str]:
    """List the files in a directory of the workspace."""
    base = _inside(directory)
    return sorted(str(p.relative_to(ROOT)) for p in base.iterdir())[:200]


def read_file(path: str, max_chars: int = 20_000) -> str:
    """Read a text file of the workspace (the first max_chars characters)."""
    return _inside(path).read_text(encoding="utf-8", errors="replace")[:max_chars]


def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


TOOLS = {"list_files": list_files, "read_file": read_file, "word_count": word_count}
SYSTEM = ("You are a concise coding assistant working in the user's workspace. Use the tools to look at "
          "files; use lcm_grep / lcm_expand to recall details from earlier in the conversation.")


def build_client(base_url: str | None) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                         api_key=os.environ.get("OPENAI_API_KEY") or "not-needed-for-local-servers")


def run(argv: Sequence[str] | None = None, *, client: Any = None, out: Any = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("AGENT_MODEL", "gpt-4o-mini"))
    ap.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    ap.add_argument("--db", default="agent.db")
    ap.add_argument("--conversation", default="main")
    ap.add_argument("--user", default=os.environ.get("USER", "me"))
    ap.add_argument("--window", type=int, default=None, help="context window (default: the model's, if known)")
    ap.add_argument("--once", metavar="MESSAGE", help="answer one message and exit")
    args = ap.parse_args(argv)
    out = out or sys.stdout
    options: dict[str, Any] = {"context_window": args.window} if args.window else {}
    try:
        mem = lossless.open(args.db, model=args.model, embedder=None, **options)
    except lossless.ValidationError:  # a model lossless does not know: say the window
        mem = lossless.open(args.db, embedder=None, **(options or {"context_window": 32_000}))
    with mem:
        conv = mem.conversation(args.conversation, metadata={"user": args.user})
        if not conv.messages():
            conv.add("system", SYSTEM)
        client = client or build_client(args.base_url)
        messages: Iterator[str] | list[str] = [args.once] if args.once else _stdin_lines()
        for text in messages:
            if text.strip() in ("/quit", "/exit"):
                break
            if text.strip() == "/compact":
                report = conv.compact(reason="/compact command")
                print(f"[compacted: {report.tokens_before} -> {report.tokens_after} tokens]", file=out)
                continue
            try:
                result = conv.turn(text, call=client, model=args.model, tools=TOOLS)
            except lossless.LosslessError as exc:
                print(f"error: {exc}", file=out)
                continue
            print(result.reply, file=out)
        conv.end()  # keep this session's decisions and preferences for the next one
    return 0


def _stdin_lines() -> Iterator[str]:
    """The user's messages, one per line, read as the conversation goes."""
    while True:
        try:
            yield input("you> ")
        except EOFError:
            return


if __name__ == "__main__":
    raise SystemExit(run())
