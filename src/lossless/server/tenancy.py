"""Tenants: what one API key can reach, by namespacing stored ids.

A keyed tenant ``acme`` owns the conversations stored as ``@acme/<id>`` and the memories
whose user is ``@acme/<user>`` or whose agent is ``@acme/<agent>`` or ``@acme`` (the
tenant-wide owner, used when a record or conversation names no agent). The API shows and
takes the bare ids (``<id>``, ``<user>``, ``<agent>``); two tenants can both have a
conversation ``support-1`` and never see each other's. A conversation id of another
tenant simply does not exist in this one's namespace: 404.

The implicit tenant of a keyless server (loopback only) is the local operator: ids as
stored, the whole database, like the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.validate import check_conversation_id
from lossless.longterm.records import OWNER_KEYS
from lossless.longterm.validate import check_metadata_owners, check_new_owner, check_owner
from lossless.store import scoped

if TYPE_CHECKING:
    from lossless.core.types import ConversationInfo
    from lossless.engine import Memory
    from lossless.longterm.records import MemoryRecord

__all__ = ["OWNER_KEYS", "Tenant"]


@dataclass(frozen=True, slots=True)
class Tenant:
    """``name`` None: the implicit tenant of a keyless server (no namespacing)."""

    name: str | None
    key_id: str | None = None

    @property
    def implicit(self) -> bool:
        return self.name is None

    @property
    def prefix(self) -> str:
        return f"@{self.name}/" if self.name is not None else ""

    @property
    def wide_owner(self) -> str | None:
        """The agent owner of the tenant's records that name no agent."""
        return f"@{self.name}" if self.name is not None else None

    # -- conversations ---------------------------------------------------------------

    def stored_id(self, public_id: object) -> str:
        """The stored conversation id for the id a client uses."""
        cid = check_conversation_id(public_id)
        stored = self.prefix + cid
        if len(stored) > 512:
            raise ValidationError(f"conversation id is {len(cid)} characters; the limit here is "
                                  f"{512 - len(self.prefix)}")
        return stored

    def owns(self, stored_id: str) -> bool:
        return self.implicit or stored_id.startswith(self.prefix)

    def public_text(self, text: str) -> str:
        """A message that names stored ids, with the tenant's ids as the tenant sees them."""
        return text.replace(self.prefix, "") if self.prefix else text

    def public_id(self, stored_id: str) -> str:
        return stored_id[len(self.prefix):] if self.prefix and stored_id.startswith(self.prefix) else stored_id

    def conversation_ids(self, memory: Memory) -> list[str]:
        """Every stored conversation id of this tenant (the implicit one: all)."""
        return scoped.conversation_ids(memory.store, "" if self.implicit else self.prefix)

    def conversations(self, memory: Memory, limit: int, offset: int) -> list[ConversationInfo]:
        """This tenant's conversations, most recently updated first."""
        if self.implicit:
            return memory.conversations(limit=limit, offset=offset)
        return memory.store.list_conversations(limit=limit, offset=offset, id_prefix=self.prefix)

    def metadata_in(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        """Conversation metadata as stored: owners namespaced, and the tenant-wide agent
        when none is named, so assembly and distillation stay inside the tenant."""
        meta = dict(metadata or {})
        if self.implicit:
            return meta
        check_metadata_owners(meta)  # as the tenant wrote them: an error names their value
        for key in OWNER_KEYS:
            if key in meta and meta[key] is not None:
                if not isinstance(meta[key], str) or not meta[key]:
                    raise ValidationError(f"metadata {key!r} must be a non-empty string")
                meta[key] = self.prefix + meta[key]
        if meta.get("agent") is None and meta.get("agent_id") is None:
            meta["agent"] = self.wide_owner
        return meta

    def metadata_out(self, metadata: dict[str, Any]) -> dict[str, Any]:
        meta = dict(metadata)
        if self.implicit:
            return meta
        for key in OWNER_KEYS:
            value = meta.get(key)
            if value == self.wide_owner:
                del meta[key]
            elif isinstance(value, str):
                meta[key] = self.public_id(value)
        return meta

    # -- memories --------------------------------------------------------------------

    def owner(self, value: object, what: str, *, new: bool = False) -> str | None:
        """A user or agent id as stored (None stays None), checked as the tenant wrote it
        (an error names their value, not the namespaced one); ``new``: the owner of a
        record about to be stored (one line of printable text)."""
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{what} must be a non-empty string")
        (check_new_owner if new else check_owner)(value, what)
        return self.prefix + value

    def record_owners(self, user: object, agent: object) -> tuple[str | None, str | None]:
        """Owners of a new record: namespaced, and tenant-wide when it names neither."""
        stored_user, stored_agent = self.owner(user, "user", new=True), self.owner(agent, "agent", new=True)
        if stored_user is None and stored_agent is None:
            stored_agent = self.wide_owner
        return stored_user, stored_agent

    def search_agents(self, agent: object) -> list[str | None]:
        """The agent owners a memory search runs as: the one named, and the tenant-wide one."""
        named = self.owner(agent, "agent")
        if self.implicit:
            return [named]
        return [named, self.wide_owner] if named is not None else [self.wide_owner]

    def search_memories(self, memory: Memory, query: str, *, user: object = None, agent: object = None,
                        kind: list[str] | None = None, limit: int = 10,
                        min_score: float | None = None) -> list[MemoryRecord]:
        """The memories ``user`` and ``agent`` (the tenant's own names) may see that match
        ``query``, best first: searched as the agent named and as the tenant-wide one;
        never another tenant's, nor (for a keyed tenant) the operator's ownerless ones."""
        stored_user = self.owner(user, "user")
        found: dict[str, MemoryRecord] = {}
        for stored_agent in self.search_agents(agent):
            for record in memory.memories.search(query, user=stored_user, agent=stored_agent, kind=kind, limit=limit,
                                                 include_global=self.implicit, min_score=min_score):
                if record.id not in found or (record.score or 0) > (found[record.id].score or 0):
                    found[record.id] = record
        return sorted(found.values(), key=lambda r: (-(r.score or 0), r.id))[:limit]

    def memory_ids(self, memory: Memory) -> list[str]:
        """Every memory id this tenant owns (the implicit one: all)."""
        return memory.memories.ids(namespace=self.wide_owner)

    def owns_record(self, record: MemoryRecord) -> bool:
        if self.implicit:
            return True
        return any(o is not None and (o == self.wide_owner or o.startswith(self.prefix))
                   for o in (record.user, record.agent))

    def record_out(self, record: MemoryRecord) -> dict[str, Any]:
        data = record.to_dict()
        if self.implicit:
            return data
        for key in ("user", "agent"):
            value = data.get(key)
            data[key] = None if value == self.wide_owner or value is None else self.public_id(str(value))
        cid = data.get("conversation_id")
        data["conversation_id"] = self.public_id(cid) if isinstance(cid, str) and self.owns(cid) else None
        data["scope"] = "user" if data["user"] else "agent" if data["agent"] else "tenant"
        return data

    def check_record(self, record: MemoryRecord) -> MemoryRecord:
        if not self.owns_record(record):
            raise NotFoundError(f"no memory with id {record.id!r}")
        return record
