"""Erasing while the worker embeds (issue 30, attacker 4).

The worker reads a conversation's units, embeds them outside any transaction (a model
call takes milliseconds to seconds), then stores their vectors and cached embeddings. An
erase that lands in between replaces those units: what the worker then stores must not
bring the erased text back, neither as a vector of a unit that no longer exists nor as a
cached embedding of the erased text. Checked with a real worker thread, on SQLite and
(``--store=postgres``) PostgreSQL, by reading the database directly afterwards.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.compaction.erase import plan_erase
from lossless.embed.base import Vectors
from lossless.recall.units import message_units, text_sha256
from lossless.store.erase import StalePlan, erase
from lossless.store.runner import sql_runner
from lossless.testing import HashEmbedder

from .backends import StoreTarget, raw_query


class GatedEmbedder(HashEmbedder):
    """Holds every embedding call until the test lets it go (``go``), after saying it has
    started (``started``): the worker has read its units and is embedding them."""

    model = "gated-64"

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.go = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.started.set()
        self.go.wait(20)
        return super().embed(texts)


class SlowEmbedder(HashEmbedder):
    """Takes a few milliseconds per call, as a small local model does on a CPU."""

    model = "slow-64"

    def embed(self, texts: Sequence[str]) -> Vectors:
        time.sleep(0.03)
        return super().embed(texts)


def _vector_rowids(target: str) -> list[int]:
    """The unit rowids of every stored vector, read from the database file itself."""
    rowids: list[int] = []
    if target.startswith("postgresql://"):
        for (name,) in raw_query(target, "SELECT name FROM vector_indexes"):
            rowids += [int(r[0]) for r in raw_query(target, f"SELECT unit_rowid FROM {name}")]
        return rowids
    import apsw
    import sqlite_vec

    conn = apsw.Connection(target)
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        for name, backend in list(conn.execute("SELECT name, backend FROM vector_indexes")):
            if backend == "sqlite-vec":
                rowids += [int(r[0]) for r in conn.execute(f"SELECT rowid FROM {name}")]
    finally:
        conn.close()
    return rowids


def _assert_nothing_erased_is_left(target: str, secrets: list[str], embedded: list[str]) -> None:
    """No unit, vector or cached embedding of erased text, read behind lossless's back."""
    units = {int(r[0]): (r[1], r[2]) for r in raw_query(target, "SELECT rowid, text, text_sha256 FROM recall_units")}
    assert not [t for t, _ in units.values() if any(s in t for s in secrets)]
    orphans = [r for r in _vector_rowids(target) if r not in units]
    assert orphans == [], f"{len(orphans)} vector(s) of units that were erased"
    cached = {r[0] for r in raw_query(target, "SELECT text_sha256 FROM embedding_cache")}
    erased = {text_sha256(t) for t in embedded if any(s in t for s in secrets)}
    assert erased, "the worker never embedded the text it raced with"
    assert cached & erased == set(), f"{len(cached & erased)} cached embedding(s) of erased text"
    # every cached embedding is one of a stored unit's text (the test asks no query)
    assert cached <= {sha for _, sha in units.values()}


def _open(target: str, embedder: Any) -> lossless.Memory:
    return lossless.open(target, embedder=embedder, context_window=8192)


def test_an_embedding_that_lands_after_an_erase_stores_nothing_of_it(store_target: StoreTarget) -> None:
    """Every cycle forces the race: the worker has read the new message's units and is
    embedding them when the erase replaces them; then its vectors arrive."""
    target = store_target("gated")
    emb = GatedEmbedder()
    secrets = [f"okapi-ledger-{i:03d}" for i in range(12)]
    mem = _open(target, emb)
    conv = mem.conversation("c")
    try:
        for i, secret in enumerate(secrets):
            emb.started.clear()
            emb.go.clear()
            msg = conv.add(role="user" if i % 2 == 0 else "assistant",
                           content=f"The vault code is {secret}, keep it safe.")
            assert emb.started.wait(20), "the worker never started embedding"
            conv.erase([msg.id], reason="leaked", by="test")
            emb.go.set()
            assert mem.wait_idle(timeout=60)
        assert conv.backlog().units_not_embedded == 0
    finally:
        emb.go.set()
        mem.close()
    _assert_nothing_erased_is_left(target, secrets, emb.texts)


def test_sixty_add_then_erase_cycles_beside_a_working_worker_leave_no_vector(store_target: StoreTarget) -> None:
    """The attacker's run: add a message and erase it at once, 60 times, while the worker
    thread embeds behind; afterwards no vector or cached embedding of any erased text."""
    target = store_target("cycles")
    emb = SlowEmbedder()
    secrets = [f"heron-passkey-{i:03d}" for i in range(60)]
    mem = _open(target, emb)
    conv = mem.conversation("c")
    try:
        for i, secret in enumerate(secrets):
            conv.add(role="user", content=f"question {i}: what is the door code?")
            msg = conv.add(role="assistant", content=f"The door code is {secret}.")
            # as an agent's turn would: the worker starts once writes pause (compaction/worker.py
            # SETTLE_SECONDS), and the erase lands before, during or after its embedding
            time.sleep(0.05 + (i % 5) * 0.01)
            conv.erase([msg.id], reason="leaked", by="test")
        assert mem.wait_idle(timeout=120)
        assert conv.backlog().units_not_embedded == 0
    finally:
        mem.close()
    _assert_nothing_erased_is_left(target, secrets, emb.texts)


class _Steps:
    """A worker and an eraser taken apart into their reads and their writes, so a test can
    put an erase between any read and the write that follows it (one thread, no timing)."""

    def __init__(self, mem: lossless.Memory, conv: lossless.Conversation, emb: HashEmbedder) -> None:
        self.mem, self.conv, self.emb = mem, conv, emb
        self.ix = mem.recaller.index_store
        self.index = mem.recaller.index_name()
        self.held_cut: tuple[int, list[Any], int, int] | None = None
        self.held_batch: tuple[list[Any], Vectors] | None = None
        self.held_plan: Any = None
        self.secrets: list[str] = []

    def add(self) -> None:
        secret = f"quokka-pin-{len(self.secrets):03d}"
        self.secrets.append(secret)
        self.conv.add(role="user" if len(self.secrets) % 2 else "assistant", content=f"My pin is {secret}.")

    def _target(self) -> str | None:
        live = [m for m in self.conv.messages() if m.content != "[erased]"]
        return live[-1].id if live else None

    def erase(self) -> None:
        target = self._target()
        if target is not None and self.held_plan is None:  # (a held plan holds the compaction lease)
            self.conv.erase([target], reason="test", by="test")

    def cut_read(self) -> None:
        erasures = self.ix.erasures("c")  # as Recaller.cut_units: the tombstones before the messages
        message_seq, window_seq = self.ix.progress("c")
        last = self.mem.store.last_seq("c")
        units = message_units(self.mem.store.get_messages("c", message_seq + 1, last), self.mem.counter)
        self.held_cut = (erasures, units, last, window_seq)

    def cut_write(self) -> None:
        if self.held_cut is not None:
            erasures, units, last, window_seq = self.held_cut
            self.ix.add_units("c", units, last, window_seq, erasures)
            self.held_cut = None

    def embed_read(self) -> None:
        assert self.index is not None
        self.mem.recaller.cut_units("c")
        batch = self.ix.pending(self.index, "c", 8)
        if batch:
            self.held_batch = (batch, self.emb.embed([u.text for u in batch]))

    def embed_write(self) -> None:
        if self.held_batch is not None:
            batch, vectors = self.held_batch
            assert self.index is not None
            self.ix.add_vectors(self.index, "c", list(zip(batch, vectors, strict=True)),
                                {u.text_sha256 for u in batch})
            self.held_batch = None

    def plan(self) -> None:
        target = self._target()
        if target is not None:
            self.held_plan = plan_erase(self.mem.compactor, "c", [target], reason="test", by="test")[0]

    def plan_write(self) -> None:
        if self.held_plan is not None and self.held_plan.messages:
            with contextlib.suppress(StalePlan):  # erase_messages plans again; here the message stays
                erase(self.mem.store, self.held_plan)
            self.held_plan = None

    def check(self) -> None:
        """After the steps and a full catch-up: every message indexed, nothing erased left."""
        self.mem.recaller.cut_units("c")
        self.mem.recaller.embed_pending("c")
        assert self.mem.recaller.uncut("c") == 0 and self.mem.recaller.unembedded("c") == 0
        erased = [m.seq for m in self.conv.messages() if m.content == "[erased]"]
        gone = [s for i, s in enumerate(self.secrets) if i + 1 in erased]
        runner = sql_runner(self.mem.store)
        run = runner.query
        units = {int(r[0]): (r[1], r[2], r[3]) for r in run("SELECT rowid, text, text_sha256, kind FROM recall_units "
                                                             "WHERE conversation_id = ?", ("c",))}
        assert not [t for t, _, _ in units.values() if any(s in t for s in gone)]
        # every message not erased has its message unit (nothing lost to a refused write), and
        # an erased one none (tests/test_erased_units.py)
        cut = {int(r[0]) for r in run("SELECT first_seq FROM recall_units WHERE conversation_id = ? "
                                      "AND kind = 'message'", ("c",))}
        assert cut == set(range(1, len(self.secrets) + 1)) - set(erased)
        for (name, backend) in run("SELECT name, backend FROM vector_indexes"):
            col = "unit_rowid" if runner.dialect == "postgresql" else "rowid"
            if backend in ("sqlite-vec", "pgvector"):
                vectors = {int(r[0]) for r in run(f"SELECT {col} FROM {name} WHERE conversation_id = ?", ("c",))}
                assert vectors == set(units)
        cached = {r[0] for r in run("SELECT text_sha256 FROM embedding_cache")}
        assert not cached & {text_sha256(t) for t in self.emb.texts if any(s in t for s in gone)}


_WORKER = ["cut_read", "cut_write", "embed_read", "embed_write"] * 3  # the worker's steps, in its order
_OTHERS = st.lists(st.sampled_from(["add", "add", "erase", "plan", "plan_write"]), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(others=_OTHERS, schedule=st.lists(st.booleans(), min_size=len(_WORKER), max_size=len(_WORKER) + 12))
def test_no_interleaving_of_cuts_embeddings_and_erases_keeps_erased_text(scratch_store: Callable[[], str],
                                                                          others: list[str],
                                                                          schedule: list[bool]) -> None:
    """Property: however the worker's reads and writes (cut, embed) interleave with adds
    and erases (planned, then written), afterwards no unit, vector or cached embedding
    holds erased text, every vector belongs to a stored unit, and every message is cut
    and embedded."""
    emb = HashEmbedder()
    with lossless.open(scratch_store(), embedder=emb, compaction="deferred", context_window=8192) as mem:
        run = _Steps(mem, mem.conversation("c"), emb)
        run.add()
        worker, rest = iter(_WORKER), iter(others)
        for worker_moves in schedule:
            step = next(worker, None) if worker_moves else next(rest, None)
            if step is not None:
                getattr(run, step)()
        for step in [*worker, *rest]:
            getattr(run, step)()
        run.check()


@pytest.mark.postgres
def test_a_cut_beside_an_erase_in_flight_waits_for_it_on_postgresql(pg_url: str) -> None:
    """PostgreSQL runs an erase and a cut at once. The erase is held (another connection
    locks the message row it rewrites) after it took the conversation's recall_progress
    row, in a conversation never cut before (no such row yet); the cut beside it must
    wait and then cut the erased text, not write units of the old text the erase
    cannot see."""
    import psycopg

    emb = HashEmbedder()
    with lossless.open(pg_url, embedder=emb, compaction="deferred") as mem:
        conv = mem.conversation("c")
        msg = conv.add(role="user", content="the vault code is tapir-4410")
        holder = psycopg.connect(pg_url)
        try:
            holder.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (msg.id,))
            erased = threading.Thread(target=conv.erase, args=([msg.id],), kwargs={"reason": "t", "by": "t"})
            erased.start()
            assert _waiting(pg_url, 1), "the erase never reached the held row"
            cut = threading.Thread(target=mem.recaller.cut_units, args=("c",))
            cut.start()
            cut.join(2)  # a cut that does not wait is done by now; one that waits is still blocked
            holder.commit()
            erased.join(30)
            cut.join(30)
            assert not erased.is_alive() and not cut.is_alive()
        finally:
            holder.close()
        mem.recaller.cut_units("c")
        texts = [r[0] for r in raw_query(pg_url, "SELECT text FROM recall_units")]
        assert not [t for t in texts if "tapir" in t]
        # it was cut (an erased message leaves no unit: the mark says it was read)
        assert raw_query(pg_url, "SELECT message_seq FROM recall_progress WHERE conversation_id = 'c'") == [(1,)]


def _waiting(url: str, n: int) -> bool:
    """Whether ``n`` backends of this database wait for a lock (polled, at most 20 s)."""
    for _ in range(400):
        rows = raw_query(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND wait_event_type = 'Lock'")
        if int(rows[0][0]) >= n:
            return True
        time.sleep(0.05)
    return False
