"""The plug-ins' migrations (issue 28: plug-ins own their tables).

``longterm/schema.py`` and ``files/schema.py`` register their steps with the store's
schema when imported; the store numbers them (``schema.SLOTS``) and refuses a list with
one missing: a database must never be opened without a plug-in's tables, as if the step
were not there.
"""

from __future__ import annotations

import inspect
import sys

import pytest

from lossless.core.errors import MigrationError
from lossless.store import schema
from lossless.store.postgres import migrations as pg_migrations
from lossless.store.sqlite import migrations as sqlite_migrations


@pytest.mark.parametrize(("missing", "dialect", "message"), [
    ("memories", sqlite_migrations.SCHEMA, "migration 4 (memories) is not registered: import lossless.longterm"),
    ("memories", pg_migrations.SCHEMA, "migration 4 (memories) is not registered: import lossless.longterm"),
    ("files", sqlite_migrations.SCHEMA, "migration 6 (files) is not registered: import lossless.files"),
    ("files", pg_migrations.SCHEMA, "migration 8 (files) is not registered: import lossless.files"),
    ("tasks_and_forgetting", pg_migrations.SCHEMA,
     "migration 14 (tasks_and_forgetting) is not registered: import lossless.longterm"),
])
def test_a_schema_without_a_plugins_step_is_refused(missing: str, dialect: schema.SchemaDialect,
                                                     message: str) -> None:
    registry = schema.REGISTRY.without(missing)
    assert missing not in registry
    with pytest.raises(MigrationError) as caught:
        schema.migrations(dialect, registry)
    assert str(caught.value) == message


def test_every_slot_is_registered_by_the_package_it_names() -> None:
    by_name = {p.step.name: p for p in schema.REGISTRY}
    assert set(by_name) == {s.name for s in schema.SLOTS}
    for slot in schema.SLOTS:
        shared = by_name[slot.name].step.shared
        assert shared is not None and shared.__module__.startswith(slot.package + ".")
    store_names = {s.name for s in schema.STEPS}
    assert store_names.isdisjoint(by_name)


def test_the_full_list_has_every_version_once() -> None:
    for module in (sqlite_migrations, pg_migrations):
        versions = [v for v, _, _ in module.MIGRATIONS]
        assert versions == list(range(1, len(versions) + 1))


def test_a_step_takes_the_slot_the_store_gave_it_once() -> None:
    registry = schema.REGISTRY.without("memories")
    with pytest.raises(MigrationError, match="not a slot"):
        registry.register(schema.Step("memories", 4, 5, None))
    with pytest.raises(MigrationError, match="not a slot"):
        registry.register(schema.Step("widgets", 18, 19, None))
    with pytest.raises(MigrationError, match="registered twice"):
        registry.register(schema.Step("files", 6, 8, None))


def test_every_part_of_a_plugins_step_has_a_place() -> None:
    """A part names a place in the plug-in's shared text: a misspelt name would leave a
    statement out without a word."""
    for plugin in schema.REGISTRY:
        assert plugin.step.shared is not None
        text = inspect.getsource(sys.modules[plugin.step.shared.__module__])
        for parts in plugin.parts.values():
            assert [p for p in parts if f"d.part('{p}')" not in text] == []
