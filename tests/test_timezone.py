"""``timezone``: the zone times are shown in. A Chinese user's message sent at 07:30 in
Beijing on the 20th is 23:30 UTC on the 19th; every time the model or the user reads
was UTC, so "what did I do on the 20th?" found it under the 19th. With
``timezone="Asia/Shanghai"`` recalled dates, summary spans, the times a summarizer reads,
``lcm_expand``'s headers and the CLI's views are Beijing times; what is stored, and the
JSON of the API, stays UTC."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli import main
from lossless.core.errors import ValidationError
from lossless.core.tokens import get_counter
from lossless.core.zones import zone_of
from lossless.summarize.base import SummaryItem, SummaryRequest
from lossless.summarize.prompts import build_prompt
from tests.conftest import StoreTarget
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]

# 2024-05-19 23:30 UTC = 2024-05-20 07:30 in Beijing
PARK_AT = datetime(2024, 5, 19, 23, 30, tzinfo=UTC)


def _chat(conv: lossless.Conversation) -> None:
    """A week of short turns, the park visit among them, then enough to push it out."""
    t0 = PARK_AT - timedelta(days=3)
    rows: list[dict[str, Any]] = []
    for i in range(120):
        at = t0 + timedelta(hours=2 * i)
        rows.append({"role": "user" if i % 2 == 0 else "assistant", "created_at": at,
                     "content": f"第{i}条：今天天气不错，我们聊聊别的事情。"})
    rows.append({"role": "user", "created_at": PARK_AT, "content": "我早上去颐和园划船了，看到了好多鸳鸯。"})
    rows.append({"role": "assistant", "created_at": PARK_AT + timedelta(minutes=1), "content": "听起来很惬意！"})
    rows.sort(key=lambda r: r["created_at"])
    conv.add_many(rows)


def _memory_block(ctx: lossless.AssembledContext) -> str:
    return "\n".join(str(m["content"]) for m in ctx.messages if m["role"] == "system")


def _park_date(block: str) -> str:
    """The date line the park message is recalled under."""
    lines = block.splitlines()
    at = next(i for i, line in enumerate(lines) if "颐和园" in line)
    return next(line for line in reversed(lines[:at]) if re.fullmatch(r"\[\d{4}-\d\d-\d\d\]", line))


@pytest.mark.parametrize(("zone", "date"), [(None, "[2024-05-19]"), ("Asia/Shanghai", "[2024-05-20]"),
                                            ("+08:00", "[2024-05-20]"), ("America/New_York", "[2024-05-19]")])
def test_a_recalled_message_is_dated_in_the_zone(store_target: StoreTarget, zone: str | None, date: str) -> None:
    options = {"timezone": zone} if zone else {}
    with lossless.open(store_target("tz-recall"), embedder=None, context_window=2048, compaction="inline",
                       **options) as mem:
        conv = mem.conversation("c")
        _chat(conv)
        assert conv.messages()[-1].created_at.tzinfo is not None
        ctx = conv.assemble(budget_tokens=1024, query="我去颐和园那天看到了什么？")
        block = _memory_block(ctx)
        assert "颐和园划船" in block and _park_date(block) == date, block
        # stored times are UTC whatever the zone
        stored = next(m for m in conv.messages() if "颐和园" in m.text)
        assert stored.created_at == PARK_AT


def test_summaries_are_written_and_shown_in_the_zone(store_target: StoreTarget) -> None:
    """The extractive summary's message headers and a summary's span, as the model sees
    them, in Beijing time."""
    with lossless.open(store_target("tz-summary"), embedder=None, context_window=2048, compaction="inline",
                       timezone="Asia/Shanghai") as mem:
        conv = mem.conversation("c")
        _chat(conv)
        conv.compact(full=True)
        summaries = mem.store.summaries(conv.id)
        assert summaries
        by_seq = {m.seq: m for m in conv.messages()}
        headers = [(int(seq), when) for s in summaries if s.depth == 0
                   for seq, when in re.findall(r"\[#(\d+) (\d{4}-\d\d-\d\d \d\d:\d\d) user\]", s.content)]
        assert len(headers) > 3
        for seq, when in headers:
            assert when == by_seq[seq].created_at.astimezone(zone_of("Asia/Shanghai")).strftime("%Y-%m-%d %H:%M")
        ctx = conv.assemble(budget_tokens=2048)
        block = _memory_block(ctx)
        spans = re.findall(r'time="([^"]+)"', block)
        assert spans
        shown = {s.id: s for s in summaries}
        for sid, span in re.findall(r'<summary id="([^"]+)"[^>]*time="([^"]+)"', block):
            start = shown[sid].earliest_at.astimezone(zone_of("Asia/Shanghai")).strftime("%Y-%m-%d %H:%M")
            assert span.startswith(start), (span, start)


def test_an_llm_summarizer_reads_times_in_the_zone() -> None:
    items = (SummaryItem("message", "msg_1", "我早上去颐和园划船了。", 7, 7, PARK_AT, PARK_AT, role="user"),
             SummaryItem("message", "msg_2", "听起来很惬意！", 8, 8, PARK_AT + timedelta(minutes=1),
                         PARK_AT + timedelta(minutes=1), role="assistant"))
    counter = get_counter("cl100k_base")
    _, utc_prompt = build_prompt(SummaryRequest(items, 0, 100, counter))
    _, beijing = build_prompt(SummaryRequest(items, 0, 100, counter, timezone="Asia/Shanghai"))
    assert "[#7 2024-05-19 23:30 user]" in utc_prompt
    assert "[#7 2024-05-20 07:30 user]" in beijing and "2024-05-20 07:30 → 2024-05-20 07:31" in beijing


def test_the_compactor_passes_the_zone_to_an_llm_summarizer(store_target: StoreTarget,
                                                            fake_openai: FakeOpenAIServer) -> None:
    """Through the real OpenAI wire format: the prompt the model gets has Beijing times."""
    from lossless.summarize.openai_chat import OpenAISummarizer

    summarizer = OpenAISummarizer("gpt-test", base_url=fake_openai.base_url, timeout=5.0, max_retries=0)
    with lossless.open(store_target("tz-llm"), embedder=None, context_window=2048, compaction="inline",
                       summarizer=summarizer, timezone="Asia/Shanghai") as mem:
        conv = mem.conversation("c")
        _chat(conv)
        conv.compact(full=True)
    prompts = [str(r.body["messages"][-1]["content"]) for r in fake_openai.chat_requests()]
    assert prompts
    first = next(p for p in prompts if "[#1 " in p)
    assert "[#1 2024-05-17 07:30 user]" in first, first[:400]  # 2024-05-16 23:30 UTC


def test_expand_headers_are_in_the_zone() -> None:
    with lossless.open(":memory:", embedder=None, timezone="Asia/Shanghai") as mem:
        conv = mem.conversation("c")
        msg = conv.add("user", "我早上去颐和园划船了。", created_at=PARK_AT)
        out: Any = conv.tools.call("lcm_expand", {"id": msg.id})
        assert out["header"] == "[#1 2024-05-20 07:30 user]"
        hit = conv.tools.call("lcm_grep", {"query": "颐和园"})
        assert hit["hits"][0]["created_at"] == PARK_AT.isoformat()  # (JSON: UTC, with its offset)


@pytest.mark.parametrize("bad", ["Mars/Base", "", "+25:00", "../etc/passwd", "Asia/", "UTC+8:99"])
def test_an_unknown_zone_is_refused_naming_it(tmp_path: Path, bad: str) -> None:
    db = tmp_path / "tz.db"
    with pytest.raises(ValidationError, match="timezone must be an IANA time zone name") as refused:
        lossless.open(db, embedder=None, timezone=bad)
    assert repr(bad) in str(refused.value)
    assert not db.exists()  # refused before the file is made


@pytest.mark.parametrize(("name", "offset"), [("UTC", 0), ("+08:00", 480), ("UTC+8", 480), ("-0530", -330),
                                              ("GMT-3", -180), ("Asia/Kolkata", 330)])
def test_zone_names_and_offsets(name: str, offset: int) -> None:
    at = datetime(2024, 1, 15, 12, 0, tzinfo=UTC)
    delta = at.astimezone(zone_of(name)).utcoffset()
    assert delta is not None and delta == timedelta(minutes=offset)


def test_the_environment_sets_the_zone_for_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "env.db"
    with lossless.open(db, embedder=None) as mem:
        mem.save_settings(timezone="Europe/Berlin")
    with lossless.open(db, embedder=None) as mem:
        assert mem.config.timezone == "Europe/Berlin"
    monkeypatch.setenv("LOSSLESS_TIMEZONE", "Asia/Shanghai")
    with lossless.open(db, embedder=None) as mem:
        assert mem.config.timezone == "Asia/Shanghai"  # the process's beats the store's
    with lossless.open(db, embedder=None, timezone="UTC") as mem:
        assert mem.config.timezone == "UTC"  # and an explicit one beats both
    monkeypatch.setenv("LOSSLESS_TIMEZONE", "Beijing")
    with pytest.raises(ValidationError, match=r"\$LOSSLESS_TIMEZONE: timezone must be .*'Beijing'"):
        lossless.open(db, embedder=None)


def test_the_cli_shows_times_in_the_zone(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cli.db"
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("c").add("user", "我早上去颐和园划船了。", created_at=PARK_AT)
    monkeypatch.setenv("LOSSLESS_TIMEZONE", "Asia/Shanghai")
    assert main(["--db", str(db), "show", "c"]) == 0
    out = capsys.readouterr().out
    assert "2024-05-20 07:30" in out and "2024-05-19 23:30" not in out, out
    assert main(["--db", str(db), "ls"]) == 0
    assert "updated (Asia/Shanghai)" in capsys.readouterr().out  # the column says which zone
    monkeypatch.delenv("LOSSLESS_TIMEZONE")
    assert main(["--db", str(db), "show", "c"]) == 0
    assert "2024-05-19 23:30" in capsys.readouterr().out
    assert main(["--db", str(db), "ls"]) == 0
    assert "updated (UTC)" in capsys.readouterr().out
    monkeypatch.setenv("LOSSLESS_TIMEZONE", "Beijing")
    assert main(["--db", str(db), "ls"]) != 0
    err = capsys.readouterr().err
    assert "LOSSLESS_TIMEZONE" in err and "Traceback" not in err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(minutes=st.integers(-12 * 60, 14 * 60).map(lambda m: m - m % 15),
       at=st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2040, 1, 1)))
def test_property_a_recalled_line_is_dated_by_the_zone(minutes: int, at: datetime) -> None:
    """Whatever the offset and the time, the recalled message sits under the date its
    time has in that zone."""
    sign = "+" if minutes >= 0 else "-"
    name = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    when = at.replace(tzinfo=UTC)
    with lossless.open(":memory:", embedder=None, context_window=2048, compaction="inline", timezone=name) as mem:
        conv = mem.conversation("c")
        rows = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"第{i}条：闲聊。",
                 "created_at": when + timedelta(minutes=i)} for i in range(1, 80)]
        conv.add_many([{"role": "user", "content": "我去颐和园划船了。", "created_at": when}, *rows])
        block = _memory_block(conv.assemble(budget_tokens=600, query="颐和园"))
        expected = when.astimezone(timezone(timedelta(minutes=minutes))).strftime("[%Y-%m-%d]")
        assert _park_date(block) == expected


@pytest.mark.parametrize(("zone", "on_the_20th"), [(None, False), ("Asia/Shanghai", True)])
def test_a_date_in_a_search_is_a_day_of_the_zone(store_target: StoreTarget, zone: str | None,
                                                 on_the_20th: bool) -> None:
    """The model sees the park message under [2024-05-20] in Beijing time and asks for
    "since 2024-05-20": it is found. A bound without an offset is a time of the zone; one
    with an offset means what it says."""
    options = {"timezone": zone} if zone else {}
    with lossless.open(store_target("tz-since"), embedder=None, **options) as mem:
        conv = mem.conversation("c")
        conv.add("user", "我早上去颐和园划船了。", created_at=PARK_AT)
        conv.add("user", "晚上又去颐和园看了灯。", created_at=PARK_AT + timedelta(hours=12))  # 20th either way

        def found(**bounds: str) -> int:
            out: Any = conv.tools.call("lcm_grep", {"query": "颐和园", **bounds})
            return len({h["first_seq"] for h in out["hits"]})

        assert found(since="2024-05-20") == (2 if on_the_20th else 1)
        assert found(until="2024-05-19") == (0 if on_the_20th else 1)
        assert found(since="2024-05-20", until="2024-05-20") == (2 if on_the_20th else 1)
        assert found(since="2024-05-20T07:00") == (2 if on_the_20th else 1)
        assert found(since="2024-05-19T23:00+00:00") == 2  # an offset given: the same instant anywhere
        assert len(conv.search("颐和园", since=datetime(2024, 5, 20))) == (2 if on_the_20th else 1)
        assert len(mem.search("颐和园", until="2024-05-19")) == (0 if on_the_20th else 1)


def test_the_demo_shows_its_team_s_own_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's scenes are written in the team's local time: 「早！」 at 09:19 in Hangzhou
    was shown as 01:19 (UTC). It shows its team's clock now, unless the environment names a zone."""
    from lossless.demo.conversation import demo_conversation, demo_utc_offset

    monkeypatch.delenv("LOSSLESS_TIMEZONE", raising=False)
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "none")
    first = next(m for m in demo_conversation(7, "zh") if m["role"] == "user")
    assert demo_utc_offset(7, "zh") == 8
    local = first["created_at"].astimezone(zone_of("+08:00")).strftime("%Y-%m-%d %H:%M")
    utc = first["created_at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    assert main(["--db", str(tmp_path / "zh.db"), "demo", "--lang", "zh"]) == 0
    assert f"[#2 {local} user" in capsys.readouterr().out
    # the store remembers the zone: the commands the demo suggests show the same times
    assert main(["--db", str(tmp_path / "zh.db"), "grep", "demo", "拾光数智"]) == 0
    assert f"#2 user {local}" in capsys.readouterr().out
    # a store that holds conversations already keeps its own zone
    with lossless.open(tmp_path / "mine.db", embedder=None) as mem:
        mem.conversation("mine").add("user", "我的对话", created_at="2024-05-20T07:30:00+00:00")
    assert main(["--db", str(tmp_path / "mine.db"), "demo", "--lang", "zh"]) == 0
    capsys.readouterr()
    with lossless.open(tmp_path / "mine.db", embedder=None) as mem:
        assert mem.config.timezone == "UTC"
    monkeypatch.setenv("LOSSLESS_TIMEZONE", "UTC")
    assert main(["--db", str(tmp_path / "zh-utc.db"), "demo", "--lang", "zh"]) == 0
    assert f"[#2 {utc} user" in capsys.readouterr().out


def test_a_time_without_an_offset_is_a_time_of_the_zone(store_target: StoreTarget, tmp_path: Path) -> None:
    """"2024-05-20 07:30" from a Beijing user's import or app, with the zone set, is 07:30
    in Beijing: stored as that instant, shown under the 20th, found by since="2024-05-20".
    Without a zone a naive time stays exactly as given (DESIGN.md's contract: tests/test_api.py)
    and is read as UTC, as searches' bounds read it: a reader in another zone sees it at
    that instant (it was shown as given, 07:30 in every zone, while filtered as UTC)."""
    with lossless.open(store_target("tz-naive"), embedder=None, timezone="Asia/Shanghai") as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": "我早上去颐和园划船了。", "created_at": "2024-05-20 07:30"},
                       {"role": "user", "content": "昨晚去颐和园看了灯。", "created_at": datetime(2024, 5, 19, 20, 0)}])
        first, second = conv.messages()
        assert first.created_at == PARK_AT and first.created_at.tzinfo is not None
        assert second.created_at == datetime(2024, 5, 19, 12, 0, tzinfo=UTC)
        out: Any = conv.tools.call("lcm_grep", {"query": "颐和园", "since": "2024-05-20"})
        assert [h["first_seq"] for h in out["hits"]] == [1]  # the evening of the 19th is not the 20th
        assert conv.tools.call("lcm_expand", {"id": first.id})["header"] == "[#1 2024-05-20 07:30 user]"  # type: ignore[index]
    path = tmp_path / "naive.db"
    with lossless.open(path, embedder=None) as mem:
        msg = mem.conversation("c").add("user", "颐和园", created_at="2024-05-20 07:30")
        assert msg.created_at == datetime(2024, 5, 20, 7, 30) and msg.created_at.tzinfo is None  # as given
    with lossless.open(path, embedder=None, timezone="Asia/Shanghai") as mem:  # read in another zone
        conv = mem.conversation("c")
        assert conv.tools.call("lcm_expand", {"id": msg.id})["header"] == "[#1 2024-05-20 15:30 user]"  # type: ignore[index]
        out = conv.tools.call("lcm_grep", {"query": "颐和园", "since": "2024-05-20T12:00"})
        assert [h["first_seq"] for h in out["hits"]] == [1]  # 07:30 UTC is 15:30 here: after noon, as shown
