"""``lcm_compact``: compact one conversation now, from an MCP client, with progress.

The server's worker compacts in the background as messages arrive; this tool is the
explicit ``/compact`` (seed 004): everything outside the fresh tail is summarized (``full``:
and condensed down to one root), waiting for a compaction already running. With a
``progressToken`` the client sees messages summarized of those due, after each summary
written, and an ``info`` log line per summary at that log level. Nothing is deleted: each
message stays readable with ``lcm_expand``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from lossless.core.errors import CompactionBusyError, NotFoundError
from lossless.server.mcp_notify import current_call
from lossless.server.mcp_scope import public, tenant_conversation
from lossless.server.tenancy import Tenant

if TYPE_CHECKING:
    from lossless.engine import Memory

__all__ = ["add_compact_tool", "compact_now"]

Run = Callable[[Callable[[Tenant], dict[str, Any]]], Awaitable[dict[str, Any]]]


def compact_now(memory: Memory, conversation_id: str, *, full: bool = False) -> dict[str, Any]:
    """Compact ``conversation_id`` now (forced), reporting progress to the MCP call if any."""
    if memory.get_conversation(conversation_id) is None:
        raise NotFoundError(f"no conversation {conversation_id!r}")
    store = memory.store
    start = store.covered_seq(conversation_id)
    due = max(0, store.last_seq(conversation_id) - memory.config.fresh_tail_count - start)
    call = current_call()
    written = 0

    def step() -> bool:
        nonlocal written
        written += 1
        covered = store.covered_seq(conversation_id) - start
        if call is not None:
            call.progress(min(covered, due), due or None, f"{written} summaries written, {covered} messages summarized")
            call.log("info", f"compaction of {conversation_id!r}: summary {written}, messages up to "
                             f"#{start + covered} summarized")
        return False  # never asked to stop early: the caller waits for all of it

    if call is not None:
        call.progress(0, due or None, f"{due} messages due for summarizing")
    report = memory.compactor.compact(conversation_id, force=True, full=full, reason="mcp lcm_compact",
                                      wait=memory.config.tool_wait_seconds, should_stop=step)
    if report.busy:
        raise CompactionBusyError(f"{report.skipped}; try again when it is done")
    return {"conversation_id": conversation_id, "summaries_written": len(report.created),
            "leaves": report.leaves, "condensed": report.condensed, "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after, "skipped": report.skipped, "seconds": round(report.seconds, 3)}


def add_compact_tool(server: MCPServer[Any], mem: Callable[[], Memory], run: Run) -> None:
    """``lcm_compact``."""

    @server.tool(name="lcm_compact", description=(
        "Compact one conversation now: summarize its history outside the recent messages (full: and condense "
        "the summaries down to one root), and wait until it is done. Nothing is deleted; every message stays "
        "readable with lcm_expand. Returns the summaries written and the context tokens before and after."))
    async def lcm_compact(
        conversation: Annotated[str, Field(description="The conversation to compact.")],
        full: Annotated[bool, Field(description="Also condense the summaries down to a single root.")] = False,
    ) -> dict[str, Any]:
        return await run(lambda t: public(compact_now(mem(), tenant_conversation(mem(), t, conversation).id, full=full),
                                          t))
