"""How the CLI shows things: rich renderables and the JSON shapes behind ``--json``.

Stored text always goes through :class:`rich.text.Text` (never markup), so a message that
contains ``[bold]`` is shown as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text
from rich.tree import Tree

from lossless.core.graphemes import cluster_start
from lossless.core.render import chat_message_text, format_time, message_text
from lossless.core.types import AssembledContext, ChatMessage, Message, Summary
from lossless.core.zones import in_zone

__all__ = [
    "TIER_ORDER",
    "chat_messages",
    "dag_json",
    "dag_tree",
    "day_span",
    "expand_items",
    "grep_hits",
    "key_values",
    "message_line",
    "minute",
    "one_line",
    "show_in",
    "summary_label",
    "tier_footer",
    "view_time",
    "zone_label",
]

TIER_ORDER = ("pinned", "fresh_tail", "summary", "root", "recall", "omitted")


_ZONE: list[tzinfo] = [UTC]  # the zone the views show times in (Config.timezone of the open store)


def show_in(zone: tzinfo) -> None:
    """Show the views' times in ``zone`` from now on (one store per CLI process)."""
    _ZONE[0] = zone


def zone_label() -> str:
    """What the views' time columns say their times are in: ``UTC``, ``Asia/Shanghai``."""
    return str(_ZONE[0])


def view_time(dt: datetime) -> datetime:
    """``dt`` as the views show it: in the open store's ``timezone`` (UTC by default)."""
    return in_zone(dt, _ZONE[0])


def minute(dt: datetime) -> str:
    """``2024-03-01 09:05``: ``dt`` to the minute, in the views' zone."""
    return format_time(dt, _ZONE[0])


def one_line(text: str, width: int = 80) -> str:
    """Whitespace collapsed, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = cluster_start(flat, width - 1) or width - 1  # never half a flag or a joined emoji
    return flat[:cut] + "…"


def day_span(first: datetime, last: datetime) -> str:
    """``2024-03-01 → 2024-03-04``, or ``2024-03-01 09:05–11:30`` within one day."""
    a, b = view_time(first), view_time(last)
    if a.date() != b.date():
        return f"{a:%Y-%m-%d} → {b:%Y-%m-%d}"
    if a.strftime("%H:%M") == b.strftime("%H:%M"):
        return f"{a:%Y-%m-%d %H:%M}"
    return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M}"


def summary_label(node: Summary) -> Text:
    """``sum_… d2 #1–#120 2024-03-01 → 2024-03-04 (812 tok, 31 msgs)``."""
    label = Text()
    label.append(node.id, style="bold cyan")
    label.append(f" d{node.depth} ", style="magenta")
    label.append(f"#{node.first_seq}–#{node.last_seq} ")
    label.append(day_span(node.earliest_at, node.latest_at), style="green")
    label.append(f" ({node.token_count} tok, {node.message_count} msgs)", style="dim")
    return label


def message_line(msg: Message, width: int = 80) -> Text:
    """``#121 user Maya: first 80 characters of the text``."""
    line = Text()
    line.append(f"#{msg.seq} ", style="bold")
    line.append(msg.role, style="yellow")
    if msg.name:
        line.append(f" {msg.name}", style="yellow")
    line.append(" ")
    line.append(one_line(message_text(msg), width))
    return line


# -- show: the DAG --------------------------------------------------------------------


def dag_tree(title: str, frontier: Sequence[Summary], summaries: Iterable[Summary],
             tail: Sequence[Message], *, messages: Sequence[Message] | None = None,
             levels: int | None = None, tail_limit: int | None = None) -> Tree:
    """The frontier roots oldest first with their descendants beneath, then the raw tail.

    ``messages`` (every message of the conversation) puts the originals under each leaf;
    ``levels`` shows only that many levels below each root; ``tail_limit`` shows only the
    newest that many raw-tail messages.
    """
    by_id = {s.id: s for s in summaries}
    by_msg_id = {m.id: m for m in messages} if messages is not None else None
    tree = Tree(Text(title, style="bold"), guide_style="dim")
    for root in frontier:
        _add_tree(tree.add(summary_label(root)), root, by_id, by_msg_id, levels)
    shown = list(tail)
    if tail_limit is not None and len(shown) > tail_limit:
        hidden = len(shown) - tail_limit
        shown = shown[len(shown) - tail_limit:]
        tree.add(Text(f"… {hidden} older raw-tail message{'s' if hidden != 1 else ''}", style="dim"))
    for msg in shown:
        tree.add(message_line(msg))
    return tree


def _add_tree(branch: Tree, node: Summary, by_id: Mapping[str, Summary],
              by_msg_id: Mapping[str, Message] | None, levels: int | None) -> None:
    if levels is not None and levels <= 0:
        hidden = [ref for ref in node.sources if ref.kind == "summary" or by_msg_id is not None]
        if hidden:
            what = "summaries" if hidden[0].kind == "summary" else "messages"
            branch.add(Text(f"… {len(hidden)} {what}", style="dim"))
        return
    deeper = None if levels is None else levels - 1
    for ref in node.sources:
        if ref.kind == "summary":
            child = by_id.get(ref.id)
            if child is not None:
                _add_tree(branch.add(summary_label(child)), child, by_id, by_msg_id, deeper)
        elif by_msg_id is not None and ref.id in by_msg_id:
            branch.add(message_line(by_msg_id[ref.id]))


def _summary_json(node: Summary) -> dict[str, Any]:
    return {
        "id": node.id, "kind": "summary", "depth": node.depth, "first_seq": node.first_seq,
        "last_seq": node.last_seq, "earliest_at": node.earliest_at.isoformat(),
        "latest_at": node.latest_at.isoformat(), "tokens": node.token_count, "messages": node.message_count,
    }


def _message_json(msg: Message) -> dict[str, Any]:
    return {"id": msg.id, "kind": "message", "seq": msg.seq, "role": msg.role, "name": msg.name,
            "created_at": msg.created_at.isoformat(), "tokens": msg.token_count,
            "preview": one_line(message_text(msg))}


def _node_json(node: Summary, by_id: Mapping[str, Summary],
               by_msg_id: Mapping[str, Message] | None) -> dict[str, Any]:
    children: list[dict[str, Any]] = []
    for ref in node.sources:
        if ref.kind == "summary" and ref.id in by_id:
            children.append(_node_json(by_id[ref.id], by_id, by_msg_id))
        elif ref.kind == "message" and by_msg_id is not None and ref.id in by_msg_id:
            children.append(_message_json(by_msg_id[ref.id]))
    out = _summary_json(node)
    if children:
        out["children"] = children
    return out


def dag_json(conversation_id: str, frontier: Sequence[Summary], summaries: Iterable[Summary],
             tail: Sequence[Message], *, messages: Sequence[Message] | None = None) -> dict[str, Any]:
    """``show --json``: nested dicts, roots oldest first, then the raw tail."""
    by_id = {s.id: s for s in summaries}
    by_msg_id = {m.id: m for m in messages} if messages is not None else None
    return {
        "conversation": conversation_id,
        "roots": [_node_json(root, by_id, by_msg_id) for root in frontier],
        "tail": [_message_json(m) for m in tail],
    }


# -- assemble -------------------------------------------------------------------------


def chat_messages(messages: Sequence[ChatMessage]) -> list[RenderableType]:
    """Each message as a rule with its role (and name), then its text."""
    out: list[RenderableType] = []
    for i, msg in enumerate(messages, 1):
        who = msg["role"] + (f" {msg['name']}" if msg.get("name") else "")
        if msg.get("tool_call_id"):
            who += f" (result of {msg.get('tool_call_id')})"
        out.append(Rule(Text(f"{i} · {who}", style="bold yellow"), align="left", style="dim"))
        out.append(Text(chat_message_text(msg)))
    return out


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages``, ``1,024 matches``: a count with its noun agreeing."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def tier_footer(ctx: AssembledContext) -> Text:
    """``2946 / 3000 tokens · fresh_tail 1222 · summary 1007 · root 116 · recall 408``."""
    tiers = ctx.tier_tokens()
    text = Text()
    text.append(f"{ctx.tokens} / {ctx.budget_tokens} tokens", style="bold")
    text.append(f" in {counted(len(ctx.messages), 'message')}")
    for tier in [t for t in TIER_ORDER if t in tiers] + sorted(set(tiers) - set(TIER_ORDER)):
        text.append(" · ")
        text.append(f"{tier} {tiers[tier]}", style="cyan")
    return text


# -- grep / describe / expand ---------------------------------------------------------


def _iso_short(value: str) -> str:
    try:
        return minute(datetime.fromisoformat(value))
    except ValueError:
        return value


def grep_hits(result: Mapping[str, Any], *, show_conversation: bool,
              keyword_label: str = "by keywords (not embedded yet)", mark_keyword: bool = False) -> RenderableType:
    """``lcm_grep`` hits: one header line each (id, span, time) and the snippet under it;
    with ``mark_keyword`` (a semantic search, or one whose query the embedder does not
    read) the hits found by keywords say so with ``keyword_label``."""
    hits = result.get("hits", [])
    if not hits:
        return Text(f"no matches for {result.get('query')!r}", style="dim")
    lines: list[RenderableType] = []
    for hit in hits:
        head = Text()
        head.append(hit["id"], style="bold cyan")
        if show_conversation:
            head.append(f" [{hit['conversation_id']}]", style="blue")
        span = f"#{hit['first_seq']}" if hit["first_seq"] == hit["last_seq"] else f"#{hit['first_seq']}–#{hit['last_seq']}"
        head.append(f" {span} ")
        head.append(f"d{hit['depth']} " if hit["kind"] == "summary" else f"{hit.get('role') or ''} ", style="magenta")
        head.append(_iso_short(str(hit["created_at"])), style="green")
        if mark_keyword and hit.get("matched") == "keyword":
            head.append(f" {keyword_label}", style="yellow")
        lines.append(head)
        lines.append(Padding(Text(one_line(str(hit.get("snippet", "")), 200)), (0, 0, 0, 4), expand=False))
    lines.append(Text(counted(int(result.get("count", len(hits))), "match", "matches"), style="dim"))
    return Group(*lines)


def key_values(pairs: Mapping[str, Any]) -> Text:
    """``key   value`` lines, keys padded to one column (no table chrome, no trailing blanks)."""
    width = max((len(k) for k in pairs), default=0)
    text = Text()
    for i, (key, value) in enumerate(pairs.items()):
        if i:
            text.append("\n")
        text.append(f"{key:<{width}}  ", style="bold")
        text.append("—" if value is None else str(value))
    return text


def expand_items(result: Mapping[str, Any], limit: int | None = None) -> list[RenderableType]:
    """``lcm_expand`` items (messages with their headers, or child summaries) as text."""
    out: list[RenderableType] = []
    items = list(result.get("items", []))
    for item in items[:limit] if limit is not None else items:
        if item.get("kind") == "message":
            out.append(Rule(Text(str(item.get("header", item["id"])), style="bold yellow"), align="left", style="dim"))
            out.append(Text(chat_message_text(item)))
        else:
            span = f"#{item['first_seq']}–#{item['last_seq']}"
            out.append(Rule(Text(f"{item['id']} d{item['depth']} {span}", style="bold cyan"), align="left", style="dim"))
            out.append(Text(str(item.get("content", ""))))
    return out
