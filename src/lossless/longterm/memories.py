"""Long-term memories in the SQLite file: add (deduplicated), search (keyword + vector,
scope-isolated), list, update, forget, and distil a conversation into memories.

Scope rules (the one thing a memory store must never get wrong):

* A record's owners are its ``user`` and ``agent``; its scope is derived from them
  (user set → ``user``, else agent set → ``agent``, else ``global``).
* :meth:`Memories.search` is what an agent acting for ``user`` (and as ``agent``) may
  see: a record is visible only if **every owner it has matches** the search. So a search
  for user A sees A's records, the global ones and the agent-only records of the given
  agent; never a record of user B, nor one of another agent. ``user=None`` means "no
  user": records that have a user are not visible at all. ``include_global=False`` drops
  the ownerless records.
* :meth:`ls`, :meth:`count` and :meth:`forget` are administration: their ``user`` /
  ``agent`` / ``kind`` / ``scope`` arguments are plain filters, ``None`` meaning "any".
"""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from lossless.core.errors import NotFoundError, QueryError, StoreError, ValidationError
from lossless.core.validate import timestamp
from lossless.longterm import extract as rules
from lossless.longterm import forgetting
from lossless.longterm.backend import memory_backend
from lossless.longterm.records import DEFAULT_IMPORTANCE, SCOPES, MemoryRecord, Scope, search_text
from lossless.longterm.relevance import relevance_boost
from lossless.longterm.tasks import TaskDraft, merge_lists, task_id_for
from lossless.longterm.validate import (
    MAX_CONTENT_CHARS,
    NewMemory,
    check_content,
    check_importance,
    check_kinds,
    check_limit,
    check_metadata,
    check_new,
    check_owner,
    check_status,
    check_strings,
    dumps,
)
from lossless.longterm.vectors import MemoryVectors, drop_cached, text_sha256
from lossless.recall.queries import QueryVectors
from lossless.store.rows import prefix_upper

if TYPE_CHECKING:
    from lossless.core.tokens import TokenCounter
    from lossless.core.types import Message
    from lossless.embed.base import Embedder
    from lossless.longterm.forgetting import ForgetPolicy, Forgotten
    from lossless.store.base import Store
    from lossless.summarize.base import Summarizer

__all__ = ["MAX_CONTENT_CHARS", "Memories", "content_hash", "dedupe_hash", "memory_id", "same_text"]

log = logging.getLogger("lossless")

_ORDERS = {
    "recent": "m.created_ts DESC, m.rowid DESC",
    "oldest": "m.created_ts ASC, m.rowid ASC",
    "used": "m.last_used_ts DESC, m.rowid DESC",
    "importance": "m.importance DESC, m.last_used_ts DESC, m.rowid DESC",
}
_COLS = (
    "m.rowid, m.id, m.kind, m.content, m.importance, m.user_id, m.agent_id, m.scope, m.metadata, "
    "m.source_message_ids, m.conversation_id, m.created_at, m.last_used_at, m.use_count, m.token_count, "
    "m.task_id, m.task_type, m.status, m.result, m.patterns, m.errors, m.last_used_ts"
)


def _folded(content: str) -> str:
    return " ".join(unicodedata.normalize("NFC", content).casefold().split())


def same_text(content: str) -> str:
    """``content`` as the dedupe check compares it: NFC-normalised, case-folded, whitespace
    collapsed, trailing punctuation (ASCII or full-width, and the tilde chat ends a line
    with) dropped. So "I prefer tea." and "i prefer  tea" are one memory, and so are
    "我对花生过敏", "我对花生过敏。" and "我对花生过敏～". Only the check uses it: a record keeps
    its text as given."""
    folded = _folded(content)
    end = len(folded)
    while end and (folded[end - 1].isspace() or folded[end - 1] in "~～"
                   or unicodedata.category(folded[end - 1]).startswith("P")):
        end -= 1
    return folded[:end]


def content_hash(content: str) -> str:
    """The dedupe key: sha256 of :func:`same_text`."""
    return hashlib.sha256(same_text(content).encode("utf-8")).hexdigest()


def dedupe_hash(content: str, kind: str = "fact", task_id: str | None = None) -> str:
    """The key of the unique index: :func:`content_hash`, except that a task record with a
    ``task_id`` is one per task (two tasks with the same request are two records)."""
    key = same_text(content) + (f"\n\x00{task_id}" if kind == "task" and task_id else "")
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _legacy_hash(content: str, kind: str, task_id: str | None) -> str:
    """The key records written before trailing punctuation was dropped were stored under
    (sha256 of the text only folded): the dedupe check looks for both, so the same text
    added again to an older file is still one record."""
    key = _folded(f"{content}\n\x00{task_id}" if kind == "task" and task_id else content)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _inside(content: str, held: str) -> bool:
    """Whether ``content`` is part of ``held`` (a :func:`same_text` already)."""
    key = same_text(content)
    return bool(key) and key in held


def memory_id(user: str | None, agent: str | None, chash: str, created_at: str) -> str:
    """``mem_`` + a hash of owner, content and creation time: stable, and meaningful
    (unlike a uuid) while unique even when forgotten content is added again later."""
    digest = hashlib.sha256(dumps([user, agent, chash, created_at]).encode()).hexdigest()
    return f"mem_{digest[:20]}"


def _where(clauses: list[str]) -> str:
    return " AND ".join(clauses) if clauses else "TRUE"


class Memories:
    """Long-term memory records stored next to the conversations of one store (SQLite or
    PostgreSQL: the SQL runs through :func:`~lossless.longterm.backend.memory_backend`).

    ``embedder`` (optional) adds vector search; embeddings go through the store's
    ``embedding_cache``, so the same text is never embedded twice by the same model.
    ``counter`` sizes records (``token_count``) and LLM extraction requests.
    """

    def __init__(self, store: Store, embedder: Embedder | None, counter: TokenCounter, *,
                 vector_weight: float = 0.5, min_similarity: float = 0.1,
                 clock: Callable[[], datetime] | None = None, queries: QueryVectors | None = None) -> None:
        self.store = store
        self.db = memory_backend(store)
        self.embedder = embedder
        self.counter = counter
        self.vector_weight = check_importance(vector_weight, "vector_weight")
        # A vector search always has a nearest neighbour; one this far away (cosine) is
        # not a match, so a record found only by its vector needs at least this much.
        self.min_similarity = check_importance(min_similarity, "min_similarity")
        self.clock = clock or (lambda: datetime.now(UTC))
        self._vectors: MemoryVectors | None = None
        # question vectors, each computed once; Memory shares recall's, so an assembly embeds its question once
        self.queries = queries if queries is not None else QueryVectors()

    @property
    def vectors(self) -> MemoryVectors | None:
        """The vector side, for the current ``embedder`` (None: keyword search only)."""
        e = self.embedder
        if e is None:
            return None
        if self._vectors is None or self._vectors.embedder is not e:
            self._vectors = MemoryVectors(self.store, e, self.min_similarity, self.queries)
        self._vectors.min_similarity = self.min_similarity
        return self._vectors

    # -- reading --------------------------------------------------------------------------

    def _record(self, row: Sequence[Any], score: float | None = None) -> MemoryRecord:
        (_rowid, mid, kind, content, importance, user, agent, scope, meta, sources, cid, created, used, uses,
         tokens, task_id, task_type, status, result, patterns, errors, _used_ts) = row
        return MemoryRecord(
            id=mid, kind=kind, content=content, importance=importance, user=user, agent=agent,
            scope=cast("Scope", scope), created_at=datetime.fromisoformat(created),
            last_used_at=datetime.fromisoformat(used), use_count=uses, token_count=tokens,
            metadata=json.loads(meta), source_message_ids=tuple(json.loads(sources)), conversation_id=cid,
            task_id=task_id, task_type=task_type, status=status, result=result,
            patterns=tuple(json.loads(patterns)) if patterns else (),
            errors=tuple(json.loads(errors)) if errors else (), score=score,
        )

    def _rows(self, where: str, args: Sequence[Any], tail: str = "") -> list[tuple[Any, ...]]:
        return self.db.query(f"SELECT {_COLS} FROM memories m WHERE {where} {tail}", args)

    def _by_rowids(self, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        if not rowids:
            return {}
        rows = self._rows(f"m.rowid IN ({','.join('?' * len(rowids))})", list(rowids))
        return {r[0]: r for r in rows}

    def _rows_in(self, conn: Any, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        """The rows with these rowids, read in ``conn``'s transaction."""
        marks = ",".join("?" * len(rowids))
        return {r[0]: tuple(r) for r in conn.execute(f"SELECT {_COLS} FROM memories m WHERE m.rowid IN ({marks})",
                                                       list(rowids))}

    def get(self, memory_id: str) -> MemoryRecord:
        """The record with this id (reading it does not count as a use)."""
        rows = self._rows("m.id = ?", (memory_id,))
        if not rows:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        return self._record(rows[0])

    @staticmethod
    def _filters(user: str | None, agent: str | None, kind: str | Sequence[str] | None,
                 scope: str | None) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if check_owner(user, "user") is not None:
            clauses.append("m.user_id = ?")
            args.append(user)
        if check_owner(agent, "agent") is not None:
            clauses.append("m.agent_id = ?")
            args.append(agent)
        kinds = check_kinds(kind)
        if kinds is not None:
            clauses.append(f"m.kind IN ({','.join('?' * len(kinds))})")
            args.extend(kinds)
        if scope is not None:
            if scope not in SCOPES:
                raise ValidationError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
            clauses.append("m.scope = ?")
            args.append(scope)
        return clauses, args

    def _namespace(self, namespace: object) -> tuple[str, list[Any]]:
        """The records owned inside ``namespace`` (``"@acme"``: an HTTP server tenant's,
        :mod:`lossless.server.tenancy`): a user or agent under ``@acme/``, or the agent
        ``@acme`` itself."""
        if not isinstance(namespace, str) or not namespace:
            raise ValidationError(f"namespace must be a non-empty string, got {namespace!r}")
        lo = namespace + "/"
        hi = prefix_upper(lo)
        # range scans on the owner columns rather than LIKE: '_' and '%' are legal in owner names
        return (f"({self.db.text_range('m.user_id')} OR m.agent_id = ? OR {self.db.text_range('m.agent_id')})",
                [lo, hi, namespace, lo, hi])

    def ids(self, *, namespace: str | None = None) -> list[str]:
        """Every record's id, oldest first; with ``namespace``, only those owned inside it
        (see :meth:`ls`)."""
        where, args = self._namespace(namespace) if namespace is not None else ("1 = 1", [])
        return [r[0] for r in self.db.query(f"SELECT m.id FROM memories m WHERE {where} ORDER BY m.rowid", args)]

    def ls(self, user: str | None = None, agent: str | None = None, kind: str | Sequence[str] | None = None,
           limit: int = 100, offset: int = 0, order: str = "recent", *, scope: str | None = None,
           namespace: str | None = None) -> list[MemoryRecord]:
        """Records matching the filters (``None``: any). ``order``: ``recent`` (newest
        first), ``oldest``, ``used`` (most recently used first) or ``importance``.
        ``namespace`` (``"@acme"``): only records owned inside it, a user or agent under
        ``@acme/`` or the agent ``@acme`` (an HTTP server tenant's)."""
        check_limit(limit)
        check_limit(offset, "offset", 0)
        if order not in _ORDERS:
            raise ValidationError(f"order must be one of {', '.join(_ORDERS)}; got {order!r}")
        clauses, args = self._filters(user, agent, kind, scope)
        if namespace is not None:
            owned, owners = self._namespace(namespace)
            clauses.append(owned)
            args.extend(owners)
        rows = self._rows(_where(clauses), [*args, limit, offset], f"ORDER BY {_ORDERS[order]} LIMIT ? OFFSET ?")
        return [self._record(r) for r in rows]

    def count(self, user: str | None = None, agent: str | None = None, kind: str | Sequence[str] | None = None,
              *, scope: str | None = None) -> int:
        """How many records match the filters (``None``: any)."""
        clauses, args = self._filters(user, agent, kind, scope)
        return int(self.db.query(f"SELECT count(*) FROM memories m WHERE {_where(clauses)}", args)[0][0])

    # -- writing --------------------------------------------------------------------------

    def add(self, content: str, kind: str = "fact", user: str | None = None, agent: str | None = None,
            importance: float | None = None, metadata: dict[str, Any] | None = None,
            source_message_ids: Sequence[str] | None = None, conversation_id: str | None = None,
            created_at: datetime | str | None = None, task: dict[str, Any] | None = None) -> MemoryRecord:
        """Store one memory and return it.

        ``importance`` defaults by kind (error 0.8, preference and task 0.7, pattern 0.6,
        fact 0.5). The same content (compared as :func:`same_text` does: case, whitespace
        and trailing punctuation aside) with the same owners is not stored twice: the
        existing record is returned, its ``last_used_at``/``use_count`` bumped, an
        explicitly higher importance taken and the new source message ids added.
        ``task`` (kind ``task`` only) holds ``task_id``, ``task_type``, ``status``,
        ``result``, ``patterns``, ``errors``.
        """
        new = check_new(content, kind, user, agent, importance, metadata, source_message_ids, conversation_id,
                        created_at, task)
        return self._add_many([new])[0]

    def _add_many(self, items: Sequence[NewMemory]) -> list[MemoryRecord]:
        """Insert (or find) every item in one transaction, then embed the new ones."""
        now = self.clock()
        now_iso, now_ts = now.isoformat(), timestamp(now)
        rowids: list[int] = []
        fresh: list[tuple[int, str]] = []
        with self.db.transaction() as conn:
            for new in items:
                task = new.task
                if new.kind == "task" and task.get("task_id"):
                    merged = self._merge_task(conn, new, now_iso)
                    if merged is not None:
                        rowids.append(merged[0])
                        fresh.append(merged)
                        continue
                chash = dedupe_hash(new.content, new.kind, task.get("task_id"))
                hit = self._holder(conn, new.user, new.agent, new.content, new.kind, task.get("task_id"))
                if hit is not None:
                    rowid, old_importance, old_sources = hit
                    sources = list(dict.fromkeys([*json.loads(old_sources), *new.source_message_ids]))
                    conn.execute(
                        f"UPDATE memories SET last_used_at = ?, last_used_ts = {self.db.greatest}(last_used_ts, ?), "
                        "use_count = use_count + 1, importance = ?, source_message_ids = ? WHERE rowid = ?",
                        (now_iso, now_ts, max(old_importance, new.importance or 0.0), dumps(sources), rowid),
                    )
                    rowids.append(rowid)
                    continue
                created = new.created_at or now
                created_iso = created.isoformat()
                importance = new.importance if new.importance is not None else DEFAULT_IMPORTANCE[new.kind]
                rowid = conn.execute(
                    "INSERT INTO memories (id, kind, content, content_hash, token_count, importance, user_id, "
                    "agent_id, metadata, source_message_ids, conversation_id, created_at, created_ts, "
                    "last_used_at, last_used_ts, use_count, updated_at, task_id, task_type, status, result, "
                    "patterns, errors) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?) "
                    "RETURNING rowid",
                    (
                        memory_id(new.user, new.agent, chash, created_iso), new.kind, new.content, chash,
                        self.counter.count(new.content), importance, new.user, new.agent, dumps(new.metadata),
                        dumps(list(new.source_message_ids)), new.conversation_id, created_iso, timestamp(created),
                        created_iso, timestamp(created), now_iso, task.get("task_id"), task.get("task_type"),
                        task.get("status"), task.get("result"),
                        dumps(list(task["patterns"])) if task.get("patterns") else None,
                        dumps(list(task["errors"])) if task.get("errors") else None,
                    ),
                ).fetchone()[0]
                text = search_text(new.content, task.get("result"), task.get("patterns", ()), task.get("errors", ()))
                self._index_text(conn, rowid, text)
                rowids.append(rowid)
                fresh.append((rowid, text))
        vectors = self.vectors
        if fresh and vectors is not None:
            try:
                vectors.embed(fresh)
            except Exception as exc:  # the record is stored; search embeds it later
                log.warning("lossless: embedding a new memory failed (%s); it will be retried at search time", exc)
        rows = self._by_rowids(rowids)
        return [self._record(rows[r]) for r in rowids]

    @staticmethod
    def _holder(conn: Any, user: str | None, agent: str | None, content: str, kind: str,
                task_id: str | None) -> tuple[Any, ...] | None:
        """(rowid, importance, source_message_ids) of the record of these owners that holds
        ``content`` already, if one does."""
        keys = (dedupe_hash(content, kind, task_id), _legacy_hash(content, kind, task_id))
        row = conn.execute(
            "SELECT rowid, importance, source_message_ids FROM memories WHERE coalesce(user_id, '') = ? "
            "AND coalesce(agent_id, '') = ? AND content_hash IN (?, ?) ORDER BY rowid LIMIT 1",
            (user or "", agent or "", *keys),
        ).fetchone()
        return None if row is None else tuple(row)

    def _merge_task(self, conn: Any, new: NewMemory, now_iso: str) -> tuple[int, str] | None:
        """Merge ``new`` into the record of the same owners and ``task_id``, if there is one:
        status, result and type replaced by the new ones given, patterns and errors appended
        without repeats, source ids joined, importance the higher, metadata updated; the
        content (the task's request) stays. Returns (rowid, its new search text)."""
        task = new.task
        row = conn.execute(
            f"SELECT {_COLS} FROM memories m WHERE coalesce(m.user_id, '') = ? AND coalesce(m.agent_id, '') = ? "
            "AND m.kind = 'task' AND m.task_id = ?", (new.user or "", new.agent or "", task["task_id"])).fetchone()
        if row is None:
            return None
        old = self._record(tuple(row))
        patterns = merge_lists(old.patterns, task.get("patterns", ()))
        errors = merge_lists(old.errors, task.get("errors", ()))
        result = task.get("result") or old.result
        # the type named first stays (a later write may see only the task's tail), unless a model names it
        task_type = task.get("task_type") if (old.task_type is None or new.metadata.get("extracted") == "llm") \
            else old.task_type
        sources = list(dict.fromkeys([*old.source_message_ids, *new.source_message_ids]))
        meta = {**old.metadata, **new.metadata, "writes": int(old.metadata.get("writes", 1)) + 1}
        importance = max(old.importance, new.importance or 0.0)
        conn.execute(
            "UPDATE memories SET status = ?, result = ?, task_type = ?, patterns = ?, errors = ?, "
            "source_message_ids = ?, metadata = ?, importance = ?, updated_at = ? WHERE rowid = ?",
            (task.get("status") or old.status, result, task_type or old.task_type,
             dumps(list(patterns)) if patterns else None, dumps(list(errors)) if errors else None,
             dumps(sources), dumps(meta), importance, now_iso, row[0]),
        )
        old_text = search_text(old.content, old.result, old.patterns, old.errors)
        text = search_text(old.content, result, patterns, errors)
        if text != old_text:
            self._unindex(conn, [row[0]])
            self._index_text(conn, row[0], text)
            drop_cached(conn, [text_sha256(old_text)])
        return row[0], text

    def record_task(self, draft: TaskDraft, *, conversation_id: str, user: str | None = None,
                    agent: str | None = None, task_id: str | None = None) -> MemoryRecord:
        """Write one task record from ``draft`` (see :mod:`lossless.longterm.tasks`), or
        merge it into the record of the same task (by default the task of
        ``conversation_id`` that begins at ``draft.first_seq``)."""
        tid = task_id or task_id_for(conversation_id, draft.first_seq)
        meta = {"extracted": draft.extracted, "first_seq": draft.first_seq, "last_seq": draft.last_seq}
        new = check_new(draft.request, "task", user, agent, None, meta, draft.source_message_ids,
                        conversation_id, draft.created_at, draft.task(tid))
        return self._add_many([new])[0]

    def find_task(self, task_id: str, *, user: str | None = None, agent: str | None = None) -> MemoryRecord | None:
        """The task record of these owners with this ``task_id``, if there is one."""
        rows = self._rows("coalesce(m.user_id, '') = ? AND coalesce(m.agent_id, '') = ? AND m.kind = 'task' "
                          "AND m.task_id = ?", (user or "", agent or "", task_id))
        return self._record(rows[0]) if rows else None

    def task_start(self, conversation_id: str) -> int:
        """The first seq of the conversation's current task (after the last one ended)."""
        rows = self.db.query("SELECT ended_seq FROM task_bounds WHERE conversation_id = ?", (conversation_id,))
        return int(rows[0][0]) + 1 if rows else 1

    def end_task_at(self, conversation_id: str, last_seq: int) -> None:
        """The current task of the conversation ended with ``last_seq``: the next begins after it."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO task_bounds (conversation_id, ended_seq) VALUES (?, ?) ON CONFLICT (conversation_id) "
                f"DO UPDATE SET ended_seq = {self.db.greatest}(task_bounds.ended_seq, excluded.ended_seq)",
                (conversation_id, last_seq))

    def _index_text(self, conn: Any, rowid: int, text: str) -> None:
        self.db.index_text(conn, rowid, text)

    def _unindex(self, conn: Any, rowids: Sequence[int]) -> None:
        self.db.unindex(conn, rowids)

    def update(self, memory_id: str, content: str | None = None, importance: float | None = None,
               metadata: dict[str, Any] | None = None, status: str | None = None,
               result: str | None = None) -> MemoryRecord:
        """Change a record in place (its id stays). ``metadata`` replaces the old dict;
        ``status``/``result`` are for task records. New content is re-indexed and
        re-embedded; content another record of the same owners already holds is refused."""
        new_content = None if content is None else check_content(content)
        new_importance = None if importance is None else check_importance(importance)
        new_meta = None if metadata is None else check_metadata(metadata)
        new_status = None if status is None else check_status(status)
        if result is not None and not isinstance(result, str):
            raise ValidationError(f"result must be a string, got {type(result).__name__}")
        text: str | None = None
        with self.db.transaction() as conn:
            rows = conn.execute(f"SELECT {_COLS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchall()
            if not rows:
                raise NotFoundError(f"no memory with id {memory_id!r}")
            old = self._record(rows[0])
            rowid = rows[0][0]
            if (new_status is not None or result is not None) and old.kind != "task":
                raise ValidationError(f"status and result are for task records; {memory_id} is a {old.kind!r}")
            sets: dict[str, Any] = {"updated_at": self.clock().isoformat()}
            if new_importance is not None:
                sets["importance"] = new_importance
            if new_meta is not None:
                sets["metadata"] = dumps(new_meta)
            if new_status is not None:
                sets["status"] = new_status
            if result is not None:
                sets["result"] = result
            if new_content is not None:
                holder = self._holder(conn, old.user, old.agent, new_content, old.kind, old.task_id)
                if holder is not None and holder[0] != rowid:
                    raise ValidationError("content: another memory of the same owners already holds this content")
                sets.update(content=new_content, content_hash=dedupe_hash(new_content, old.kind, old.task_id),
                            token_count=self.counter.count(new_content))
            try:
                assignments = ", ".join(f"{k} = ?" for k in sets)
                conn.execute(f"UPDATE memories SET {assignments} WHERE rowid = ?", [*sets.values(), rowid])
            except self.db.integrity_errors:
                raise ValidationError("content: another memory of the same owners already holds this content") from None
            if new_content is not None or result is not None:
                old_text = search_text(old.content, old.result, old.patterns, old.errors)
                text = search_text(new_content or old.content, result if result is not None else old.result,
                                    old.patterns, old.errors)
                self._unindex(conn, [rowid])
                self._index_text(conn, rowid, text)
                drop_cached(conn, [text_sha256(old_text)])
        vectors = self.vectors
        if text is not None and vectors is not None:
            try:
                vectors.embed([(rowid, text)])
            except Exception as exc:
                log.warning("lossless: re-embedding memory %s failed (%s); retried at search time", memory_id, exc)
        return self.get(memory_id)

    # -- searching ------------------------------------------------------------------------

    @staticmethod
    def _visible(user: str | None, agent: str | None, include_global: bool) -> tuple[list[str], list[Any]]:
        """What a search for (user, agent) may see: every owner a record has must match."""
        clauses: list[str] = []
        args: list[Any] = []
        if user is None:
            clauses.append("m.user_id IS NULL")
        else:
            clauses.append("(m.user_id IS NULL OR m.user_id = ?)")
            args.append(user)
        if agent is None:
            clauses.append("m.agent_id IS NULL")
        else:
            clauses.append("(m.agent_id IS NULL OR m.agent_id = ?)")
            args.append(agent)
        if not include_global:
            clauses.append("m.scope != 'global'")
        return clauses, args

    def search(self, query: str, user: str | None = None, agent: str | None = None,
               kind: str | Sequence[str] | None = None, limit: int = 10, include_global: bool = True,
               min_score: float | None = None) -> list[MemoryRecord]:
        """The records most relevant to ``query`` that this user/agent may see (see the
        module docstring), best first, each with a ``score`` in [0, 1]; returning a
        record counts as a use (``last_used_at``, ``use_count``).

        Relevance is the share of the query's terms a record contains (words through the
        unicode61 FTS5 index, CJK runs as character bigrams in the same index; see
        :mod:`lossless.longterm.relevance`), fused with the cosine similarity of its vector
        when there is an embedder (weight ``vector_weight``; a record found only by its
        vector needs ``min_similarity``), then scaled modestly by importance (×0.8–1.0)
        and recency of use (×0.9–1.0, half-life 30 days).
        """
        if not isinstance(query, str) or not query.strip():
            raise QueryError("search query is empty")
        check_limit(limit)
        if min_score is not None:
            check_importance(min_score, "min_score")
        user, agent = check_owner(user, "user"), check_owner(agent, "agent")
        clauses, args = self._visible(user, agent, include_global)
        kinds = check_kinds(kind)
        if kinds is not None:
            clauses.append(f"m.kind IN ({','.join('?' * len(kinds))})")
            args.extend(kinds)
        where = _where(clauses)
        wide = max(limit * 4, 40)
        keyword = self.db.keyword_candidates(query, where, args, wide)
        vector: dict[int, float] = {}
        vectors = self.vectors
        if vectors is not None:
            try:
                vector = vectors.nearest(query, where, args, wide)
            except Exception as exc:
                log.warning("lossless: memory vector search failed (%s); keyword results only", exc)
        rows = self._by_rowids(sorted(set(keyword) | set(vector)))
        if not rows:
            return []
        now_ts = timestamp(self.clock())
        w = self.vector_weight if vectors is not None else 0.0
        scored: list[tuple[float, float, str, int]] = []
        for rowid, row in rows.items():
            relevance = (1 - w) * keyword.get(rowid, 0.0) + w * max(0.0, min(1.0, vector.get(rowid, 0.0)))
            s = relevance * relevance_boost(row[4], now_ts - row[21])
            if s > 0 and (min_score is None or s >= min_score):
                scored.append((round(s, 6), row[21], row[1], rowid))
        scored.sort(key=lambda t: (-t[0], -t[1], t[2]))
        top = scored[:limit]
        if not top:
            return []
        now = self.clock()
        try:
            with self.db.transaction() as conn:
                conn.execute(
                    f"UPDATE memories SET last_used_at = ?, last_used_ts = {self.db.greatest}(last_used_ts, ?), "
                    "use_count = use_count + 1 "
                    f"WHERE rowid IN ({','.join('?' * len(top))})",
                    [now.isoformat(), timestamp(now), *(t[3] for t in top)],
                )
        except StoreError as exc:  # a search (and the assembly it serves) is a read: a full disk must not fail it
            log.warning("lossless: could not record the use of %d memories: %s", len(top), exc)
        fresh = self._by_rowids([t[3] for t in top])
        return [self._record(fresh[t[3]], score=t[0]) for t in top if t[3] in fresh]

    # -- forgetting -----------------------------------------------------------------------

    def forget(self, ids: Sequence[str] | None = None, *, user: str | None = None, agent: str | None = None,
               kind: str | Sequence[str] | None = None, scope: str | None = None,
               older_than: timedelta | datetime | None = None, importance_below: float | None = None,
               keep: int | None = None, dry_run: bool = False, all: bool = False,
               vacuum: bool = False) -> list[MemoryRecord]:
        """Delete memories for good and return them (with ``dry_run``: return what would
        be deleted, deleting nothing). Every criterion given must hold:

        * ``ids``, ``user``, ``agent``, ``kind``, ``scope``: which records (``None``: any);
        * ``older_than``: not used (or added) since this long ago / this time (seed 003:
          forget by time; a memory that keeps being recalled is not old);
        * ``importance_below``: importance under this threshold (forget by importance);
        * ``keep``: capacity, at most this many per owner (each user, each agent-only
          owner, and the global pool) among the matching records; the least recently used
          go first, then the oldest, then the least important.

        A call with no criterion at all is refused unless ``all=True``. Each call is one
        transaction: the row, its FTS entries, its vector and (if no message or other
        memory shares the exact text) its cached embedding go together. SQLite keeps the
        freed pages in the file until they are reused; ``vacuum=True`` also zeroes them
        (``secure_delete``), merges the FTS indexes and runs ``VACUUM`` and a WAL
        checkpoint, which rewrites the whole database file (slow on a large one). On
        PostgreSQL ``vacuum=True`` runs ``VACUUM FULL`` on the memory tables and the
        embedding cache (rewritten into new files; the WAL keeps the text until recycled).
        """
        if ids is None and user is None and agent is None and kind is None and scope is None \
                and older_than is None and importance_below is None and keep is None and not all:
            raise ValidationError("forget needs a criterion (ids, user, agent, kind, scope, older_than, "
                                  "importance_below or keep), or all=True to forget every memory")
        clauses, args = self._filters(user, agent, kind, scope)
        if ids is not None:
            id_list = check_strings(ids, "ids")
            clauses.append(f"m.id IN ({','.join('?' * len(id_list))})" if id_list else "FALSE")
            args.extend(id_list)
        if older_than is not None:
            if isinstance(older_than, timedelta):
                if older_than < timedelta(0):
                    raise ValidationError(f"older_than must not be negative, got {older_than!r}")
                # seconds, not dates: older than the year 1 (a million days) is every record, not an overflow
                cutoff = timestamp(self.clock()) - older_than.total_seconds()
            elif isinstance(older_than, datetime):
                cutoff = timestamp(older_than)
            else:
                raise ValidationError(f"older_than must be a timedelta or datetime, got {type(older_than).__name__}")
            clauses.append("m.last_used_ts < ?")
            args.append(cutoff)
        if importance_below is not None:
            clauses.append("m.importance < ?")
            args.append(check_importance(importance_below, "importance_below"))
        if keep is not None:
            check_limit(keep, "keep", 0)
        if dry_run:
            return [self._record(r) for r in self._victims(None, clauses, args, keep)]
        with self.db.forgetting(vacuum) as conn:
            victims = self._victims(conn, clauses, args, keep)
            if victims:
                self._delete(conn, [r[0] for r in victims], optimize=vacuum)
        if vacuum:
            self._vacuum()
        return [self._record(r) for r in victims]

    def _victims(self, conn: Any, clauses: list[str], args: list[Any], keep: int | None) -> list[tuple[Any, ...]]:
        """The records to forget, read in ``conn``'s transaction (None: outside one)."""

        def run(sql: str, values: list[Any]) -> list[tuple[Any, ...]]:
            return self.db.query(sql, values) if conn is None else [tuple(r) for r in conn.execute(sql, values)]

        if keep is None:
            return run(f"SELECT {_COLS} FROM memories m WHERE {_where(clauses)} ORDER BY m.last_used_ts, m.rowid", args)
        # capacity per owner: rank within each owner, most worth keeping first
        sql = (
            f"SELECT * FROM (SELECT {_COLS}, row_number() OVER (PARTITION BY m.scope, "
            "coalesce(m.user_id, m.agent_id, '') ORDER BY m.last_used_ts DESC, m.created_ts DESC, "
            f"m.importance DESC, m.rowid DESC) AS rank FROM memories m WHERE {_where(clauses)}) AS ranked "
            "WHERE rank > ? ORDER BY last_used_ts, rowid"
        )
        return [r[:-1] for r in run(sql, [*args, keep])]

    def _delete(self, conn: Any, rowids: list[int], *, optimize: bool) -> None:
        marks = ",".join("?" * len(rowids))
        texts = conn.execute(
            f"SELECT m.content, m.result, m.patterns, m.errors FROM memories m WHERE m.rowid IN ({marks})", rowids
        ).fetchall()
        shas = {text_sha256(search_text(c, r, json.loads(p or "[]"), json.loads(e or "[]"))) for c, r, p, e in texts}
        shas.update(r[0] for r in conn.execute(
            f"SELECT text_sha256 FROM memory_vectors WHERE memory_rowid IN ({marks})", rowids))
        self._unindex(conn, rowids)
        conn.execute(f"DELETE FROM memories WHERE rowid IN ({marks})", rowids)
        drop_cached(conn, sorted(shas))
        if optimize:
            self.db.optimize(conn)

    def _vacuum(self) -> None:
        self.db.vacuum()

    def apply_policy(self, policy: ForgetPolicy, *, dry_run: bool = False) -> list[Forgotten]:
        """Forget what the forgetting ``policy`` says (capacity per owner, age since last
        use, importance floor), each record logged with its reason and restorable; with
        ``dry_run`` only report. See :mod:`lossless.longterm.forgetting`."""
        return forgetting.apply_policy(self, policy, dry_run=dry_run)

    def forgotten(self, limit: int = 100, offset: int = 0) -> list[Forgotten]:
        """What the forgetting policy removed, newest first, with why and when."""
        return forgetting.forgotten(self, limit, offset)

    def restore(self, memory_id: str) -> MemoryRecord:
        """Put back a record the forgetting policy removed (same id and fields)."""
        return forgetting.restore(self, memory_id)

    # -- distilling -----------------------------------------------------------------------

    def distill(self, messages: Sequence[Message], *, user: str | None = None, agent: str | None = None,
                conversation_id: str | None = None, summarizer: Summarizer | None = None,
                task_request: str | None = None) -> list[MemoryRecord]:
        """Extract and store the durable items of a conversation's messages: decisions,
        preferences and facts the user stated, constraints, errors with their fixes,
        tasks with their status. Each record keeps the ids of the messages it came from.

        By rule (English and Chinese cues) unless ``summarizer`` is given: then it is
        asked for a JSON array of ``{kind, content, importance}`` and any failure (an
        exception, no parsable array) falls back to the rules.

        ``task_request`` is the request a task record holds (written alongside, see
        :mod:`lossless.longterm.distill`): a ``task`` item found inside it is that task,
        and is not stored a second time as a task of its own.
        """
        msgs = list(messages)
        if not msgs:
            return []
        if conversation_id is None:
            convs = {m.conversation_id for m in msgs}
            conversation_id = convs.pop() if len(convs) == 1 else None
        candidates: list[rules.Candidate] | None = None
        if summarizer is not None:
            candidates = rules.llm_candidates(msgs, summarizer, self.counter, conversation_id or "")
        if candidates is None:
            candidates = rules.extract(msgs)
        if task_request is not None:
            held = same_text(task_request)
            candidates = [c for c in candidates if c.kind != "task" or not _inside(c.content, held)]
        news = [
            check_new(c.content, c.kind, user, agent, c.importance, c.metadata, c.source_message_ids,
                      conversation_id, c.created_at, c.task)
            for c in candidates
        ]
        if not news:
            return []
        records = self._add_many(news)
        return list({r.id: r for r in records}.values())
