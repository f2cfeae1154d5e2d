"""``lossless show``: the summary DAG as a tree, with depths, token counts (and how much
each summary condenses), time spans, and the raw tail under its own node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from rich.text import Text
from rich.tree import Tree

from lossless.cli.render import counted, day_span, message_line, view_time
from lossless.core.types import Message, Summary

__all__ = ["dag_view", "duration", "summary_label"]


def duration(first: datetime, last: datetime) -> str:
    """``3d 4h``, ``2h 5m``, ``40s``: how long a span lasted."""
    seconds = int(abs((view_time(last) - view_time(first)).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes else f"{secs}s"


def summary_label(node: Summary) -> Text:
    """``sum_… d1 #1–#40 2024-03-01 → 2024-03-04 (3d 2h) · 812 tok ← 9,640 (11.9×) · 40 msgs``."""
    label = Text()
    label.append(node.id, style="bold cyan")
    label.append(f" d{node.depth} ", style="magenta")
    label.append(f"#{node.first_seq}–#{node.last_seq} ")
    label.append(day_span(node.earliest_at, node.latest_at), style="green")
    label.append(f" ({duration(node.earliest_at, node.latest_at)})", style="green")
    label.append(f" · {node.token_count:,} tok", style="bold")
    if node.source_token_count:
        ratio = node.source_token_count / max(node.token_count, 1)
        label.append(f" ← {node.source_token_count:,} ({ratio:.1f}×)", style="dim")
    label.append(f" · {node.message_count:,} msgs", style="dim")
    return label


def _message(msg: Message) -> Text:
    line = message_line(msg)
    line.append(f" · {msg.token_count:,} tok", style="dim")
    return line


def _add(branch: Tree, node: Summary, by_id: Mapping[str, Summary],
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
                _add(branch.add(summary_label(child)), child, by_id, by_msg_id, deeper)
        elif by_msg_id is not None and ref.id in by_msg_id:
            branch.add(_message(by_msg_id[ref.id]))


def dag_view(conversation_id: str, frontier: Sequence[Summary], summaries: Sequence[Summary],
             tail: Sequence[Message], *, total_messages: int, total_tokens: int,
             messages: Sequence[Message] | None = None, levels: int | None = None,
             tail_limit: int | None = None, root: Summary | None = None) -> Tree:
    """The whole-conversation root (if any), the frontier nodes oldest first with their
    descendants beneath, then the raw tail.

    ``messages`` puts the originals under each leaf; ``levels`` shows that many levels
    below each root; ``tail_limit`` the newest that many raw-tail messages.
    """
    by_id = {s.id: s for s in summaries}
    by_msg_id = {m.id: m for m in messages} if messages is not None else None
    tail_tokens = sum(m.token_count for m in tail)
    active = sum(s.token_count for s in frontier) + tail_tokens
    title = Text(conversation_id, style="bold")
    title.append(f" · {counted(total_messages, 'message')}, {total_tokens:,} tok")
    if summaries:
        depths = sorted({s.depth for s in summaries})
        span = f"depth {depths[0]}" if len(depths) == 1 else f"depths {depths[0]}–{depths[-1]}"
        title.append(f" · {counted(len(summaries), 'summary', 'summaries')} ({span})")
    if total_tokens:
        title.append(f" · active context {active:,} tok", style="bold")
        if active and active < total_tokens:
            title.append(f" ({total_tokens / active:.1f}× smaller)")
    tree = Tree(title, guide_style="dim")
    if root is not None:  # the whole-conversation root, over the frontier below (its sources when made)
        tree.add(Text("whole-conversation root ", style="bold") + summary_label(root))
    for top in frontier:
        _add(tree.add(summary_label(top)), top, by_id, by_msg_id, levels)
    if not tail:
        return tree
    head = Text("raw tail", style="bold yellow")
    head.append(f" #{tail[0].seq}–#{tail[-1].seq} · {counted(len(tail), 'message')} · {tail_tokens:,} tok · ")
    head.append(day_span(tail[0].created_at, tail[-1].created_at), style="green")
    node = tree.add(head)
    shown = list(tail)
    if tail_limit is not None and len(shown) > tail_limit:
        hidden = len(shown) - tail_limit
        shown = shown[len(shown) - tail_limit:]
        node.add(Text(f"… {hidden} older raw-tail message{'s' if hidden != 1 else ''}", style="dim"))
    for msg in shown:
        node.add(_message(msg))
    return tree
