"""The web page for a new user who writes Chinese, in headless Chromium (time zone
Asia/Shanghai) over a real server on 127.0.0.1 with a real store: Chinese ids and names,
long messages mixed with English and emoji, a two-character word searched from the page
and its hits opened, summaries expanded to the originals (a very large one read to its
end), times in the reader's zone, empty states, errors said plainly, and a phone's width."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import lossless
from lossless.server.keys import APIKeys
from tests.conftest import StoreTarget
from tests.server_support import served
from tests.web_support import DevTools, browser_marks, chromium_page, search_page

pytestmark = browser_marks

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)  # 17:00 in Shanghai
FAMILY = "周末计划/家庭"
LINES = ["我们周六去公园散步吧，天气预报说是晴天 ☀️", "好的！我带上野餐垫和水果 🍎🍌，还有 camera",
         "记得提醒奶奶带上她的药，she needs it at noon", "公园里的樱花开了吗？I heard it's peak bloom 🌸",
         "明天的会议改到下午三点了，请通知 team 👍", "我对花生过敏，午餐不要有花生"]
BIG = "日志 " + "line of a very large tool output 12345\n" * 16000  # ~650,000 characters, over 100k tokens


def _chat() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(90):
        text = f"第{i}条：{LINES[i % len(LINES)]}"
        if i % 9 == 0:
            text += "。这是一个很长的段落，mixed with English words and emoji 😀，" * 30
        message: dict[str, Any] = {"role": "user" if i % 2 == 0 else "assistant", "content": text,
                                   "created_at": T0 + timedelta(hours=i)}
        if i % 2 == 0:
            message["name"] = "小明"
        out.append(message)
    return out


@pytest.fixture(scope="module")
def site(lasting_store_target: StoreTarget) -> Iterator[tuple[str, lossless.Memory]]:
    mem = lossless.open(lasting_store_target("zh"), context_window=4096, embedder=None)
    family = mem.conversation(FAMILY, {"user": "小明"})
    family.add_many(_chat())
    family.compact(full=True)
    big = mem.conversation("大文件")
    big.add_many([{"role": "user", "content": "请看这个日志文件", "created_at": T0},
                  {"role": "assistant", "content": BIG, "created_at": T0 + timedelta(minutes=1)},
                  *({"role": "user" if i % 2 == 0 else "assistant", "content": f"后来的第{i}条消息 " * 10,
                     "created_at": T0 + timedelta(minutes=2 + i)} for i in range(40))])
    big.compact(full=True)
    with served(mem) as server:
        yield server.url, mem
    mem.close()


@pytest.fixture
def page() -> Iterator[DevTools]:
    with chromium_page() as p:
        p.send("Emulation.setTimezoneOverride", timezoneId="Asia/Shanghai")
        yield p


def plain(text: str) -> str:
    """``text`` without the bidi isolates (FSI, PDI) the page puts around stored text."""
    return text.replace("\u2068", "").replace("\u2069", "")


def test_a_chinese_conversation_searched_by_a_two_character_word(site: tuple[str, lossless.Memory],
                                                                 page: DevTools) -> None:
    url, mem = site
    page.open(f"{url}/?conversation={quote(FAMILY)}", "document.body.dataset.loaded")
    assert page.eval("document.body.dataset.loaded") == FAMILY
    assert FAMILY in page.text("status") and "90 messages" in page.text("conv-info")

    search_page(page, "公园")
    hits = page.eval("[...document.querySelectorAll('#search-results li[data-id]')].map((li) => li.innerText)")
    assert hits and all("公园" in hit for hit in hits)
    assert "hits for “公园”" in plain(page.text("status"))
    # the hit's time, in the reader's zone and saying which: 09:00 UTC on 1 March is 17:00 in Shanghai
    first_hit = mem.search("公园", conversations=[FAMILY], limit=20)[0]
    local = first_hit.created_at.astimezone(UTC) + timedelta(hours=8)
    assert f"{local:%Y-%m-%d %H:%M} UTC+8" in hits[0]

    # a message hit opens that message, whole, emoji and all
    message_hit = page.eval("[...document.querySelectorAll('#search-results li[data-id^=\"msg_\"] a')].map((a) => a.innerText)[0]")
    page.eval(f"document.querySelector('#search-results li[data-id=\"{message_hit}\"] a').click()")
    page.wait(f"document.body.dataset.selected === '{message_hit}'")
    stored = mem.store.get_message(message_hit)
    assert page.eval("document.getElementById('detail-content').innerText").startswith(stored.content)
    assert f"Message #{stored.seq}" in page.text("detail")

    # a summary, expanded down to its messages: names and local times in the heads
    leaf = next(s for s in mem.conversation(FAMILY).summaries() if s.depth == 0)
    node = leaf
    while node is not None and node.id not in page.eval("[...document.querySelectorAll('.node')].map((n) => n.dataset.id)"):
        node = mem.store.get_summary(parent) if (parent := mem.store.parent_of(node.id)) else None
    assert node is not None
    for _ in range(6):  # open rows from the top down to the leaf
        if page.eval(f"!!document.querySelector('.node[data-id=\"{leaf.id}\"] .msg')"):
            break
        page.eval("document.querySelectorAll('.node > .row').forEach((r) => {"
                  " const c = r.parentNode.querySelector(':scope > .children');"
                  " if (c && c.hidden && !c.dataset.filled && !r.parentNode.classList.contains('tail')) r.click(); })")
        page.eval("new Promise((ok) => setTimeout(ok, 300))")
    page.wait(f"document.querySelectorAll('.node[data-id=\"{leaf.id}\"] .msg').length === {leaf.message_count}")
    first = mem.conversation(FAMILY).messages(leaf.first_seq, leaf.first_seq)[0]
    head = page.eval(f"document.querySelector('.msg[data-id=\"{first.id}\"] .head').innerText")
    local = first.created_at.astimezone(UTC) + timedelta(hours=8)
    assert f"#{first.seq} {local:%Y-%m-%d %H:%M} UTC+8 user 小明" in head
    assert page.eval(f"document.querySelector('.msg[data-id=\"{first.id}\"] .text').innerText") == first.content

    # picking another conversation puts it in the address: a reload opens it again
    page.eval("{ const s = document.getElementById('conversation'); s.value = '大文件'; s.dispatchEvent(new Event('change')) }")
    page.wait("document.body.dataset.loaded === '大文件'")
    assert page.eval("new URLSearchParams(location.search).get('conversation')") == "大文件"
    page.eval("window.beforeReload = true; location.reload()")  # waited for in the new document, not the old
    page.wait("!window.beforeReload && document.body.dataset.loaded === '大文件'")


def test_a_very_large_message_is_read_to_its_end(site: tuple[str, lossless.Memory], page: DevTools) -> None:
    url, mem = site
    conv = mem.conversation("大文件")
    big = conv.messages(2, 2)[0]
    leaf = mem.store.leaf_for(conv.id, 2)
    assert leaf is not None and big.token_count > 100_000
    page.open(f"{url}/?conversation={quote('大文件')}", "document.body.dataset.loaded")
    for _ in range(6):
        if page.eval(f"!!document.querySelector('.msg[data-id=\"{big.id}\"]')"):
            break
        page.eval("document.querySelectorAll('.node > .row').forEach((r) => {"
                  " const c = r.parentNode.querySelector(':scope > .children');"
                  " if (c && c.hidden && !c.dataset.filled && !r.parentNode.classList.contains('tail')) r.click(); })")
        page.eval("new Promise((ok) => setTimeout(ok, 300))")
    box = f".msg[data-id=\"{big.id}\"]"
    page.wait(f"!!document.querySelector('{box}')")
    note = page.wait(f"document.querySelector('{box} .partial')?.innerText")
    assert f"of {len(BIG):,} characters shown" in note  # said: this is not all of it
    for _ in range(60):  # a slice per click, to the end
        if not page.eval(f"!!document.querySelector('{box} button.more')"):
            break
        page.eval(f"document.querySelector('{box} button.more').click()")
        page.wait(f"!document.querySelector('{box} button.more[disabled]')")
    assert page.eval(f"document.querySelector('{box} .text').firstChild.data") == BIG
    assert f"{len(BIG):,} of {len(BIG):,} characters shown" in page.eval(f"document.querySelector('{box} .partial').innerText")
    # the messages after it in the same leaf are there too
    page.wait(f"document.querySelectorAll('.node[data-id=\"{leaf.id}\"] .msg').length === {leaf.message_count} "
              f"|| !!document.querySelector('.node[data-id=\"{leaf.id}\"] > .children > button.more')")


def test_empty_states_say_what_to_do(store_target: StoreTarget, page: DevTools) -> None:
    mem = lossless.open(store_target("empty"), context_window=4096, embedder=None)
    try:
        with served(mem) as server:
            page.open(f"{server.url}/", "document.getElementById('status').innerText.includes('no conversations')")
            search_page(page, "公园")
            message = page.text("status")
            assert "no conversation" in message and "null" not in message
            assert "lossless import" in page.text("tree")  # how to get one
            page.eval("document.getElementById('assemble-form').requestSubmit()")
            page.wait("!document.getElementById('status').innerText.includes('no conversations yet')")
            assert "null" not in page.text("status")

            mem.conversation("空的").add(role="user", content="今天天气很好")
            page.open(f"{server.url}/", "document.body.dataset.loaded === '空的'")
            search_page(page, "火星")
            assert plain(page.text("search-results")).strip() == "No matches for “火星”."
    finally:
        mem.close()


def test_errors_are_said_plainly(store_target: StoreTarget, page: DevTools) -> None:
    mem = lossless.open(store_target("keyed"), context_window=4096, embedder=None)
    _, key = APIKeys(mem.store).create("xiaoming")
    try:
        with served(mem) as server:  # stopped halfway through
            for cid in ("工作", "其他"):  # 其他, the newer, is listed first
                httpx.post(f"{server.url}/v1/lossless/conversations/{quote(cid, safe='')}/messages",
                           json={"role": "user", "content": "项目进度怎么样？😀"}, headers={"authorization": f"Bearer {key}"})
            # a link to a conversation, opened before the key is given: it opens once the key is
            page.open(f"{server.url}/?conversation={quote('工作')}",
                      "document.getElementById('status').className.includes('error')")
            assert "API key field" in page.text("status")
            assert page.eval("document.activeElement.id") == "key"

            page.eval("{ const k = document.getElementById('key'); k.value = 'lsk_000000000000_wrong';"
                      "k.dispatchEvent(new Event('change')) }")
            page.wait("document.getElementById('status').innerText.includes('refused')")
            page.eval(f"{{ const k = document.getElementById('key'); k.value = {json.dumps(key)};"
                      "k.dispatchEvent(new Event('change')) }")
            page.wait("document.body.dataset.loaded === '工作'")
            assert page.eval("document.getElementById('key').getAttribute('aria-invalid')") is None
        # the server is gone: say so, not "Failed to fetch"
        search_page(page, "项目")
        message = page.text("status")
        assert "did not answer" in message and "lossless serve" in message, message
    finally:
        mem.close()


def test_a_phone_screen(site: tuple[str, lossless.Memory], page: DevTools) -> None:
    url, _ = site
    page.send("Emulation.setDeviceMetricsOverride", width=375, height=812, deviceScaleFactor=2, mobile=True)
    page.open(f"{url}/?conversation={quote(FAMILY)}", "document.body.dataset.loaded")
    page.eval("document.querySelector('.node > .row').click()")
    page.wait("!!document.querySelector('#detail h2')")
    search_page(page, "公园")
    assert page.eval("document.documentElement.scrollWidth") <= 375
    rects = page.eval("['dag-panel', 'detail'].map((id) => { const r = document.getElementById(id).getBoundingClientRect();"
                      " return [r.left, r.top, r.right, r.bottom]; })")
    (l1, t1, r1, b1), (l2, t2, r2, b2) = rects
    assert r1 - l1 > 300 and r2 - l2 > 300  # each panel gets the width, not a sliver
    assert b1 <= t2 or b2 <= t1, f"the DAG and the detail overlap: {rects}"
    assert page.eval("document.getElementById('search-query').getBoundingClientRect().right") <= 375
