"""The web page in headless Chromium against a real server with data: the rendered DOM holds
every summary of the DAG, a screenshot is a real picture, and a click-through over the
DevTools protocol selects a summary, expands the tree down to the original messages,
searches and assembles."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

import lossless
from lossless.server.run import BackgroundServer
from tests.conftest import StoreTarget, chat
from tests.server_support import served
from tests.web_support import CHROMIUM, HEADLESS, DevTools, browser_marks, chromium_page

pytestmark = browser_marks


@pytest.fixture(scope="module")
def site(lasting_store_target: StoreTarget) -> Iterator[tuple[BackgroundServer, dict[str, Any]]]:
    db = lasting_store_target("web")
    mem = lossless.open(db, context_window=4096, embedder=None)
    conv = mem.conversation("team-chat", {"user": "maya"})
    conv.add_many(chat(300, tools_every=7))
    conv.compact(full=True)
    with served(mem) as server:
        dag = httpx.get(server.url + "/v1/lossless/conversations/team-chat/dag").json()
        yield server, dag
    mem.close()


def _chromium(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *HEADLESS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout, check=False)


def test_rendered_dom_shows_the_dag(site: tuple[BackgroundServer, dict[str, Any]]) -> None:
    server, dag = site
    done = _chromium("--virtual-time-budget=10000", "--dump-dom", f"{server.url}/?conversation=team-chat")
    dom = done.stdout
    assert 'data-loaded="team-chat"' in dom, done.stderr[-2000:]
    assert dag["max_depth"] >= 2 and len(dag["summaries"]) > 10
    for summary in dag["summaries"]:
        assert f'data-id="{summary["id"]}"' in dom, f"{summary['id']} (depth {summary['depth']}) not rendered"
    assert f"{dag['messages']} messages" in dom and f"raw tail #{dag['tail']['first_seq']}" in dom


def test_screenshot_is_a_real_picture(site: tuple[BackgroundServer, dict[str, Any]], tmp_path: Path) -> None:
    server, _ = site
    shot = tmp_path / "page.png"
    done = _chromium("--virtual-time-budget=10000", "--window-size=1280,900", f"--screenshot={shot}",
                     f"{server.url}/?conversation=team-chat")
    assert shot.exists(), done.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.size == (1280, 900)
        rgb = image.convert("RGB")
        colors = rgb.getcolors(maxcolors=1_000_000) or []
        assert len(colors) > 200  # text, the depth-coloured blocks, the tiers: not a blank page
        # the DAG overview is drawn: a good share of the upper-left panel is saturated block colour
        panel = np.asarray(rgb.crop((30, 180, 740, 340)), dtype=np.int16)
        saturated = (panel.max(axis=-1) - panel.min(axis=-1) > 60).mean()
        assert saturated > 0.15


@pytest.fixture
def browser(site: tuple[BackgroundServer, dict[str, Any]]) -> Iterator[DevTools]:
    with chromium_page() as page:
        yield page


def test_click_through(site: tuple[BackgroundServer, dict[str, Any]], browser: DevTools) -> None:
    server, dag = site
    by_id = {s["id"]: s for s in dag["summaries"]}
    browser.send("Page.navigate", url=f"{server.url}/?conversation=team-chat")
    browser.wait("document.body.dataset.loaded === 'team-chat'")

    # a condensed block in the overview: its details, with its sources
    mid = next(s for s in dag["summaries"] if s["depth"] == 1)
    browser.eval(f"document.querySelector('.block[data-id=\"{mid['id']}\"]').click()")
    browser.wait(f"document.body.dataset.selected === '{mid['id']}'")
    detail = browser.eval("document.getElementById('detail').innerText")
    assert f"#{mid['first_seq']}–#{mid['last_seq']}" in detail
    assert browser.eval("document.querySelectorAll('#detail-children li').length") == len(mid["children"])

    # the tree, from the root down to a leaf's original messages
    node = by_id[dag["frontier"][0]]
    while node["child_kind"] == "summary":
        browser.eval(f"document.querySelector('.node[data-id=\"{node['id']}\"] > .row').click()")
        child = by_id[node["children"][0]]
        browser.wait(f"!!document.querySelector('.node[data-id=\"{child['id']}\"]')")
        node = child
    browser.eval(f"document.querySelector('.node[data-id=\"{node['id']}\"] > .row').click()")
    count = node["last_seq"] - node["first_seq"] + 1
    browser.wait(f"document.querySelectorAll('.node[data-id=\"{node['id']}\"] .msg').length === {count}")
    first = browser.eval(f"document.querySelector('.node[data-id=\"{node['id']}\"] .msg').innerText")
    assert f"#{node['first_seq']}" in first

    # search, then assemble under a small budget
    browser.eval("document.getElementById('search-query').value = 'service-12';"
                 "document.getElementById('search-form').requestSubmit()")
    browser.wait("document.querySelectorAll('#search-results li').length > 0")
    assert "service-12" in browser.eval("document.getElementById('search-results').innerText")
    browser.eval("document.getElementById('budget').value = '900';"
                 "document.getElementById('assemble-form').requestSubmit()")
    tokens = int(browser.wait("document.body.dataset.assembled"))
    assert 0 < tokens <= 900
    assert browser.eval("document.querySelectorAll('#tiers div').length") >= 1
    assert browser.eval("document.querySelectorAll('#assembled li').length") >= 1
    assert "error" not in browser.eval("document.getElementById('status').className")
