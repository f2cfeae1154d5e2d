"""``until`` given as a date alone means the end of that day. Searching "until
2024-05-01" excluded everything said on May 1st but its first microsecond: a person
writing a date means the whole day (``since`` a date already meant its start)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.errors import ValidationError
from lossless.core.validate import parse_datetime, parse_until

from .conftest import StoreTarget

DAYS = [datetime(2024, 4, 30, 22, 0, tzinfo=UTC), datetime(2024, 5, 1, 0, 0, tzinfo=UTC),
        datetime(2024, 5, 1, 15, 30, tzinfo=UTC), datetime(2024, 5, 1, 23, 59, 59, tzinfo=UTC),
        datetime(2024, 5, 2, 0, 0, tzinfo=UTC)]


def _fill(mem: lossless.Memory) -> lossless.Conversation:
    conv = mem.conversation("c")
    conv.add_many([{"role": "user", "content": f"我们去公园散步 walk {i}", "created_at": at} for i, at in enumerate(DAYS)])
    return conv


def _seqs(hits: list[lossless.GrepHit]) -> list[int]:
    return sorted(h.first_seq for h in hits)


def test_until_a_date_takes_the_whole_day(store_target: StoreTarget) -> None:
    with lossless.open(store_target("t"), embedder=None) as mem:
        conv = _fill(mem)
        for query in ("公园", "walk"):
            assert _seqs(conv.search(query, until="2024-05-01")) == [1, 2, 3, 4]
            assert _seqs(conv.search(query, since="2024-05-01", until="2024-05-01")) == [2, 3, 4]
            # a time keeps its meaning: up to that instant, inclusive
            assert _seqs(conv.search(query, until="2024-05-01T00:00:00+00:00")) == [1, 2]
            assert _seqs(conv.search(query, until=datetime(2024, 5, 1, tzinfo=UTC))) == [1, 2]
        assert _seqs(mem.search("公园", until="2024-05-01")) == [1, 2, 3, 4]


def test_until_a_date_over_http(store_target: StoreTarget) -> None:
    """A real server on 127.0.0.1, the answer checked against its OpenAPI document."""
    import httpx

    from .server_support import OpenAPIChecker, served

    with lossless.open(store_target("h"), embedder=None) as mem, served(mem) as server, \
            httpx.Client(base_url=server.url, timeout=30) as api:
        _fill(mem)
        spec = OpenAPIChecker(api.get("/openapi.json").json())
        body = {"query": "公园", "until": "2024-05-01"}
        hits = spec.check(api.post("/v1/lossless/conversations/c/search", json=body), body).json()["hits"]
        assert sorted(h["first_seq"] for h in hits) == [1, 2, 3, 4]
        bad = api.post("/v1/lossless/conversations/c/search", json={"query": "公园", "until": "2024-13-01"})
        assert bad.status_code in (400, 422) and "until" in bad.text


@settings(max_examples=50, deadline=None)
@given(day=st.dates(min_value=datetime(1970, 1, 2).date(), max_value=datetime(9998, 12, 30).date()))
def test_property_until_a_date_is_the_last_instant_of_that_day(day: object) -> None:
    text = f"{day}"
    end = parse_until(text)
    start = parse_datetime(text)
    assert end.date() == start.date() and (end - start).total_seconds() == 86400 - 1e-6
    assert parse_until(f"{text}T10:00:00") == parse_datetime(f"{text}T10:00:00")


def test_a_bad_until_names_it() -> None:
    with pytest.raises(ValidationError, match="until"):
        parse_until("2024-02-30")
    with pytest.raises(ValidationError, match="--until"):
        parse_until("next week", "--until")


def test_until_a_date_on_the_cli(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli.main import main

    db = tmp_path / "cli.db"
    with lossless.open(str(db), embedder=None) as mem:
        _fill(mem)
    for command in ("grep", "search"):
        assert main(["--db", str(db), "--json", command, "c", "公园", "--until", "2024-05-01"]) == 0
        hits = json.loads(capsys.readouterr().out)["hits"]
        assert sorted(h["first_seq"] for h in hits) == [1, 2, 3, 4], command


def test_a_reversed_range_is_named_not_answered_with_nothing(store_target: StoreTarget, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``since`` after ``until`` matches nothing by construction: it was answered "no
    matches", as if nothing had been said then. It is an error naming both, on the API,
    over HTTP and on the CLI; since == until (one day) stays a range."""
    import httpx

    from lossless.cli.main import main

    from .server_support import served

    with lossless.open(store_target("r"), embedder=None) as mem:
        conv = _fill(mem)
        for search in (conv.search, mem.search):
            with pytest.raises(ValidationError, match=r"since \(2024-05-02.*is after until \(2024-05-01"):
                search("公园", since="2024-05-02", until="2024-05-01")
        assert _seqs(conv.search("公园", since="2024-05-01", until="2024-05-01")) == [2, 3, 4]
        with served(mem) as server, httpx.Client(base_url=server.url, timeout=30) as api:
            bad = api.post("/v1/lossless/conversations/c/search",
                           json={"query": "公园", "since": "2030-01-01", "until": "2020-01-01"})
            assert bad.status_code in (400, 422) and "is after until" in bad.text
    db = tmp_path / "cli.db"
    with lossless.open(str(db), embedder=None) as mem:
        _fill(mem)
    assert main(["--db", str(db), "grep", "c", "公园", "--since", "2030-01-01", "--until", "2020-01-01"]) == 1
    assert "is after until" in capsys.readouterr().err
