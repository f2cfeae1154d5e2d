"""The web page against an attacker, in headless Chromium over a real server on 127.0.0.1
with a real store: stored content is untrusted (ids, names, metadata, messages, tool calls,
summaries, memories, search queries, the page's own address), the API key stays out of
addresses and off the disk, a tenant's page sees only its own conversations, and bidi
controls or endless words cannot rearrange or break the page around them. The headers
that hold the page to this: tests/test_server_headers.py."""

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
from lossless.server.run import BackgroundServer
from tests.conftest import StoreTarget
from tests.server_support import served
from tests.web_support import DevTools, browser_marks, chromium_page, search_page

pytestmark = browser_marks

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
C = "/v1/lossless/conversations"


def payloads(tag: str) -> list[str]:
    """Markup that runs script if a page ever treats it as HTML: each marks ``window.__pwned``."""
    return [f"<img src=x onerror=\"window.__pwned='{tag}-img';document.title='PWNED'\">",
            f"</script><script>window.__pwned='{tag}-script'</script>",
            f"\"><svg onload=\"window.__pwned='{tag}-svg'\">",
            f"javascript:window.__pwned='{tag}-js'",
            f"<a href=\"javascript:window.__pwned='{tag}-a'\">{tag}-link</a>",
            f"<iframe srcdoc=\"<script>parent.__pwned='{tag}-frame'</script>\"></iframe>"]


HOSTILE_ID = "\"><img src=x onerror=\"window.__pwned='cid'\">"
MISSING_ID = "<svg onload=\"window.__pwned='url'\">"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE, left open: what follows it is turned around
TURNED_ID = RLO + "evil-conversation"
TURNED_NAME = RLO + "Mallory"
LONG_WORD = "A" * 6000
LONG_ID = "长" * 200 + "x" * 300
WATCH = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
         "(e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));")


@pytest.fixture(scope="module")
def hostile(lasting_store_target: StoreTarget) -> Iterator[tuple[BackgroundServer, lossless.Memory]]:
    mem = lossless.open(lasting_store_target("hostile"), context_window=4096, embedder=None)
    conv = mem.conversation(HOSTILE_ID, {"user": "maya", "title": payloads("meta")[0], "note": payloads("meta")[2]})
    messages: list[dict[str, Any]] = []
    for i in range(72):
        p = payloads(f"m{i}")[i % 6]
        message: dict[str, Any] = {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} {p} word {i}",
                                   "created_at": T0 + timedelta(minutes=i)}
        if i % 2 == 0:
            message["name"] = payloads("name")[0]
        messages.append(message)
    messages.append({"role": "assistant", "content": "", "created_at": T0 + timedelta(minutes=80),
                     "tool_calls": [{"id": "c1", "type": "function", "function": {
                         "name": "run", "arguments": json.dumps({"cmd": payloads("arg")[1]})}}]})
    messages.append({"role": "tool", "tool_call_id": "c1", "content": payloads("tool")[2],
                     "created_at": T0 + timedelta(minutes=81)})
    conv.add_many(messages)
    conv.compact(full=True)  # the summaries quote the payloads too
    mem.memories.add("maya keeps the " + payloads("memory")[0] + " launch codes", user="maya")
    turned = mem.conversation(TURNED_ID)
    turned.add_many([{"role": "user" if i % 2 == 0 else "assistant", "name": TURNED_NAME if i % 2 == 0 else None,
                      "content": f"plain turn {i} " + (LONG_WORD if i == 3 else "words " * 12),
                      "created_at": T0 + timedelta(minutes=i)} for i in range(72)])
    turned.compact(full=True)
    mem.conversation(LONG_ID).add(role="user", content="a conversation with a very long id", created_at=T0)
    with served(mem) as server:
        yield server, mem
    mem.close()


@pytest.fixture
def page() -> Iterator[DevTools]:
    with chromium_page() as p:
        p.send("Page.addScriptToEvaluateOnNewDocument", source=WATCH)
        yield p


def _expand_everything(page: DevTools) -> None:
    """Click every summary row open, down to the original messages (bounded)."""
    for _ in range(8):
        opened = page.eval("(() => { let n = 0; document.querySelectorAll('.node > .row').forEach((r) => {"
                           " const c = r.parentNode.querySelector(':scope > .children');"
                           " if (c && c.hidden && !c.dataset.filled) { r.click(); n++; } }); return n; })()")
        page.eval("new Promise((ok) => setTimeout(ok, 300))")
        if not opened:
            return


def _nothing_ran(page: DevTools) -> None:
    assert page.eval("window.__pwned") is None
    assert page.eval("document.title") == "lossless"
    assert page.eval("document.querySelectorAll('img, svg, iframe, a[href^=\"javascript\"]').length") == 0
    assert page.eval("document.scripts.length") == 1
    assert page.eval("window.__csp") == []  # the page itself needs nothing its policy forbids


def test_stored_payloads_are_shown_as_text_and_never_run(hostile: tuple[BackgroundServer, lossless.Memory],
                                                         page: DevTools) -> None:
    server, _ = hostile
    page.open(f"{server.url}/?conversation={quote(HOSTILE_ID)}", "document.body.dataset.loaded")
    assert page.eval("document.body.dataset.loaded") == HOSTILE_ID
    assert HOSTILE_ID in page.text("status")
    assert HOSTILE_ID in page.eval("[...document.querySelectorAll('#conversation option')].map((o) => o.text).join()")
    for block in page.eval("[...document.querySelectorAll('.block[data-id]')].map((b) => b.dataset.id)"):
        page.eval(f"document.querySelector('.block[data-id=\"{block}\"]').click()")
        page.wait(f"document.body.dataset.selected === '{block}'")
    _expand_everything(page)
    shown = page.text("dag-panel")
    for text in (payloads("name")[0], payloads("m0")[0], payloads("m1")[1], payloads("m2")[2], payloads("m3")[3],
                 payloads("m4")[4], payloads("m5")[5], payloads("tool")[2]):
        assert text in shown, f"{text!r} is not shown as text"
    assert "<\\/script>" in shown or "</script>" in shown  # the tool call's arguments, as JSON text

    for query in payloads("q"):
        search_page(page, query)
        assert query in page.text("status")
    search_page(page, "turn 4")
    page.eval("document.querySelectorAll('#search-results a').forEach((a) => a.click())")
    page.eval("document.getElementById('assemble-query').value = 'maya launch codes';"
              "document.getElementById('assemble-form').requestSubmit()")
    page.wait("document.body.dataset.assembled")
    assert payloads("memory")[0] in page.text("assembled")  # the memory tier, as text
    _nothing_ran(page)

    # the address itself: an id that is not there is named as text, the key fragment too
    page.open(f"{server.url}/?conversation={quote(MISSING_ID)}#key={quote('<img/src=x/onerror=window.__pwned=1>')}",
              "document.getElementById('status').className.includes('error')")
    assert "<svg onload" in page.text("status")
    _nothing_ran(page)


@pytest.fixture(scope="module")
def tenants(lasting_store_target: StoreTarget) -> Iterator[tuple[str, str, str]]:
    """A keyed server with two tenants: acme (one conversation holding a secret) and evil."""
    mem = lossless.open(lasting_store_target("tenants"), context_window=4096, embedder=None)
    keys = APIKeys(mem.store)
    _, acme = keys.create("acme")
    _, evil = keys.create("evil")
    with served(mem) as server:
        for key, cid, text in ((acme, "秘密-plan", "the acme secret is swordfish"), (evil, "evil-notes", "evil's own")):
            r = httpx.post(f"{server.url}{C}/{quote(cid, safe='')}/messages", json={"role": "user", "content": text},
                           headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 201, r.text
        yield server.url, acme, evil
    mem.close()


def test_the_api_key_leaves_the_address_and_the_disk(tenants: tuple[str, str, str], page: DevTools) -> None:
    url, acme, evil = tenants
    page.open(f"{url}/?conversation={quote('秘密-plan')}#key={acme}&keep=1", "document.body.dataset.loaded")
    assert acme not in page.eval("location.href") and page.eval("location.hash") == "#keep=1"
    assert page.eval("localStorage.length") == 0
    assert page.eval("sessionStorage.getItem('lossless.key')") == acme  # this tab only, until it closes
    page.eval("window.beforeReload = true; location.reload()")  # waited for in the new document, not the old
    page.wait("!window.beforeReload && document.body.dataset.loaded === '秘密-plan'")
    # another key given in the address of the open page: taken, and out of the address again
    page.eval(f"location.hash = 'key={evil}'")
    page.wait("document.body.dataset.loaded === 'evil-notes'")
    assert evil not in page.eval("location.href") and page.eval("sessionStorage.getItem('lossless.key')") == evil

    # a key an earlier page version kept in localStorage is moved out of it
    page.eval(f"sessionStorage.clear(); localStorage.setItem('lossless.key', {json.dumps(acme)})")
    page.open(f"{url}/", "document.body.dataset.loaded === '秘密-plan'")
    assert page.eval("localStorage.length") == 0


def test_a_tenants_page_shows_only_its_own(tenants: tuple[str, str, str], page: DevTools) -> None:
    url, acme, evil = tenants
    page.open(f"{url}/?conversation={quote('秘密-plan')}#key={evil}",
              "document.getElementById('status').className.includes('error')")
    assert "no conversation '秘密-plan'" in page.text("status")  # said, not swapped for another one silently
    assert page.eval("[...document.querySelectorAll('#conversation option')].map((o) => o.value)") == ["", "evil-notes"]
    assert "swordfish" not in page.eval("document.body.innerText")
    page.eval("{ const s = document.getElementById('conversation'); s.value = 'evil-notes';"
              "s.dispatchEvent(new Event('change')) }")
    page.wait("document.body.dataset.loaded === 'evil-notes'")
    search_page(page, "swordfish")
    assert page.eval("document.querySelectorAll('#search-results li[data-id]').length") == 0

    # acme's page, then a wrong key typed in: acme's list and conversation leave the screen
    page.open(f"{url}/#key={acme}", "document.body.dataset.loaded === '秘密-plan'")
    page.eval("{ const k = document.getElementById('key'); k.value = 'lsk_000000000000_wrong';"
              "k.dispatchEvent(new Event('change')) }")
    page.wait("document.getElementById('status').className.includes('error')")
    assert "refused" in page.text("status")
    assert "秘密-plan" not in page.eval("document.body.innerText")
    assert page.eval("document.querySelectorAll('#conversation option').length") == 0


def _reads_left_to_right(page: DevTools, container: str, text: str) -> bool:
    """Whether ``text``, inside the element ``container`` (a selector), is laid out left to
    right: its first character left of its last."""
    found = page.eval(f"""(() => {{
        const text = {json.dumps(text)};
        const walk = document.createTreeWalker(document.querySelector({json.dumps(container)}), NodeFilter.SHOW_TEXT);
        for (let node = walk.nextNode(); node; node = walk.nextNode()) {{
            const at = node.data.indexOf(text);
            if (at < 0) continue;
            const left = (i) => {{ const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                                   return r.getBoundingClientRect().left; }};
            return [left(at), left(at + text.length - 1)];
        }}
        return null;
    }})()""")
    assert found is not None, f"{text!r} not found in {container}"
    first, last = found
    return bool(first < last)


def test_bidi_controls_stay_inside_the_stored_text(hostile: tuple[BackgroundServer, lossless.Memory],
                                                   page: DevTools) -> None:
    server, mem = hostile
    page.open(f"{server.url}/?conversation={quote(TURNED_ID)}", "document.body.dataset.loaded")
    assert _reads_left_to_right(page, "#status", "frontier summaries")  # after the id, in the status line
    leaf = next(s for s in mem.conversation(TURNED_ID).summaries() if s.depth == 0)
    page.eval(f"document.querySelector('.node[data-id=\"{leaf.id}\"] > .row')?.click()")
    _expand_everything(page)
    first = mem.conversation(TURNED_ID).messages()[0]
    page.wait(f"!!document.querySelector('.msg[data-id=\"{first.id}\"]')")
    # the name is followed by the message's id: it must not be turned around by the name
    assert _reads_left_to_right(page, f".msg[data-id=\"{first.id}\"] .head", first.id)
    search_page(page, RLO + "plain turn")
    assert _reads_left_to_right(page, "#status", "hits for")


def test_long_unbroken_text_stays_inside_the_page(hostile: tuple[BackgroundServer, lossless.Memory],
                                                  page: DevTools) -> None:
    server, _ = hostile
    page.open(f"{server.url}/?conversation={quote(TURNED_ID)}", "document.body.dataset.loaded")
    fits = "document.documentElement.scrollWidth <= window.innerWidth"
    assert LONG_ID in page.eval("[...document.querySelectorAll('#conversation option')].map((o) => o.text).join()")
    assert page.eval(fits), "a 500-character id in the list widened the page"
    _expand_everything(page)
    assert page.wait(f"[...document.querySelectorAll('.msg')].some((m) => m.innerText.includes('{LONG_WORD[:50]}'))")
    assert page.eval(fits), "an expanded message of one 6000-letter word widened the page"
    search_page(page, "plain turn 3")
    assert page.eval(fits), "a search hit widened the page"
    assert page.eval("document.getElementById('search-results').scrollWidth "
                     "<= document.getElementById('search-results').clientWidth")
    page.eval("document.getElementById('budget').value = '3000';"
              "document.getElementById('assemble-form').requestSubmit()")
    page.wait("document.body.dataset.assembled")
    assert page.eval(fits), "the assembled context widened the page"
