"""explore(): every kind detected and outlined within its token budget, big inputs in
bounded time, and never an exception on arbitrary text."""

from __future__ import annotations

import json
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless.context.explore import KINDS, Exploration, detect_kind, explore
from lossless.core.errors import ValidationError
from lossless.core.tokens import EstimatingCounter, get_counter

COUNTER = get_counter("cl100k_base")


def _within(e: Exploration, max_tokens: int) -> None:
    assert e.kind in KINDS
    assert COUNTER.count(e.summary) <= max_tokens, e.summary


# -- one input per kind ------------------------------------------------------------------

def _users(n: int) -> dict[str, object]:
    return {
        "users": [{"id": i, "name": f"user {i}", "email": None if i % 5 == 0 else f"u{i}@example.org",
                   "tags": ["a", "b"][: i % 3]} for i in range(n)],
        "meta": {"version": "1.2.3", "generated": "2024-03-01", "paging": {"page": 1, "of": 9}},
        "count": n,
    }


def test_json_object_keys_types_and_nested_shape() -> None:
    e = explore(json.dumps(_users(300), indent=2), max_tokens=400)
    _within(e, 400)
    assert e.kind == "json"
    s = e.summary
    assert s.startswith("JSON object · 3 keys")
    assert '"users": array[300] of object{id, name, email, tags}' in s
    assert "email: str|null (300)" in s  # union of keys with types and counts
    assert '"meta": object(3 keys)' in s and '"version": str(5) "1.2.3"' in s
    assert '"page": int 1' in s  # depth 2 reached
    assert '"count": int 300' in s


def test_json_array_of_objects_key_union_with_counts() -> None:
    rows = [{"id": i, "v": i * 1.5} if i % 3 else {"id": i, "w": "x"} for i in range(600)]
    e = explore(json.dumps(rows), max_tokens=300)
    _within(e, 300)
    assert e.kind == "json" and e.summary.startswith("JSON array · 600 elements")
    assert "id: int (600)" in e.summary and "v: float (400)" in e.summary and "w: str (200)" in e.summary
    assert "first: {" in e.summary


def test_json_lines() -> None:
    text = "\n".join(json.dumps({"ts": f"2024-01-01T00:00:{i % 60:02d}", "event": "click", "user": i})
                     for i in range(250))
    e = explore(text, max_tokens=300)
    _within(e, 300)
    assert e.kind == "json" and e.stats["format"] == "jsonl"
    assert "JSON Lines · 250 records" in e.summary and "user: int (250)" in e.summary


def test_csv_columns_types_nulls_ranges_and_first_rows() -> None:
    lines = ["id,name,price,day,note"]
    lines += [f"{i},item {i},{'' if i % 7 == 0 else i * 0.5},2024-01-{1 + i % 28:02d},{'hi' if i % 2 else 'yo'}"
              for i in range(1000)]
    e = explore("\n".join(lines), max_tokens=350)
    _within(e, 350)
    assert e.kind == "csv"
    assert e.stats["rows"] == 1000 and e.stats["columns"] == 5 and e.stats["header"] is True
    s = e.summary
    assert "CSV · 1,000 rows × 5 columns · comma-delimited" in s
    assert "id: int · min 0, max 999" in s
    assert "price: float · 143 null · min 0.5, max 499.5" in s
    assert "day: date · 2024-01-01 → 2024-01-28" in s
    assert "note: text · 2 distinct" in s
    assert "0 | item 0 |  | 2024-01-01 | yo" in s  # the first rows


def test_tsv_by_content_and_by_hint() -> None:
    text = "a\tb\tc\n" + "\n".join(f"{i}\tx{i}\t{i * 2}" for i in range(40))
    assert explore(text).kind == "tsv"
    assert explore(text, hint="export.tsv").stats["delimiter"] == "\t"


def test_yaml_top_level_keys() -> None:
    text = ("version: 3\nservices:\n  web:\n    image: nginx\n  db:\n    image: postgres\n"
            "volumes:\n  - data\n  - logs\nname: demo\n")
    e = explore(text, max_tokens=200)
    _within(e, 200)
    assert e.kind == "yaml"
    assert "L2 services: mapping of 2 keys: web, db" in e.summary
    assert "L7 volumes: list of 2 items" in e.summary and "L10 name: demo" in e.summary


PYTHON = '''"""A module."""
import os
from typing import Any

LIMIT = 3


def load(path: str, *, strict: bool = False) -> dict[str, Any]:
    return {}


class Store(Base):
    def get(self, key: str) -> Any:
        return None

    async def put(self, key, value):
        pass
'''

JS = """import React from 'react';
const fs = require('fs');

export function hello(name) {
  console.log(name);
}

export const add = (a, b) => a + b;

class Foo extends Bar {
  constructor() {}
}
"""

GO = """package main

import (
\t"fmt"
\t"os"
)

type Server struct {
\tAddr string
}

func (s *Server) Start(port int) error {
\tif err != nil {
\t\treturn err
\t}
\tfmt.Println("x")
\treturn nil
}

func main() {
\tx := 1
}
"""


def test_python_with_ast_signatures() -> None:
    e = explore(PYTHON, max_tokens=200)
    _within(e, 200)
    assert e.kind == "code" and e.stats["language"] == "python" and e.stats["parsed"] == "ast"
    s = e.summary
    assert "imports (2): os; typing: Any" in s
    assert "L8 def load(path: str, *, strict: bool=False) -> dict[str, Any]" in s
    assert "L12 class Store(Base)" in s and "async def put(self, key, value)" in s
    assert "LIMIT = 3" in s


def test_javascript_definitions_by_pattern() -> None:
    e = explore(JS, max_tokens=200)
    _within(e, 200)
    assert e.kind == "code" and e.stats["language"] == "javascript"
    assert "L4 export function hello(name)" in e.summary
    assert "L8 export const add = (a, b) => a + b" in e.summary
    assert "L10 class Foo extends Bar" in e.summary
    assert "import React from 'react'" in e.summary


def test_go_definitions_and_imports() -> None:
    e = explore(GO, max_tokens=200)
    _within(e, 200)
    assert e.kind == "code" and e.stats["language"] == "go"
    assert '"fmt"' in e.summary and '"os"' in e.summary
    assert "L8 type Server struct" in e.summary
    assert "L12 func (s *Server) Start(port int) error" in e.summary
    assert "L20 func main()" in e.summary


def test_code_hint_names_the_language() -> None:
    e = explore("fn main() {\n    let mut x = 1;\n}\n", hint='read_file {"path": "src/main.rs"}')
    assert e.kind == "code" and e.stats["language"] == "rust" and "L1 fn main()" in e.summary


def _log(n: int) -> str:
    lines = []
    for i in range(n):
        level = "ERROR" if i % 50 == 0 else "WARN" if i % 20 == 0 else "INFO"
        tail = f"db timeout after {i % 30}s" if level == "ERROR" else "ok"
        lines.append(f"2024-03-01 10:{i // 60 % 60:02d}:{i % 60:02d},123 {level} worker-{i % 3} job {i} {tail}")
    lines += ["Traceback (most recent call last):", '  File "app.py", line 3, in <module>', "ValueError: bad"]
    return "\n".join(lines) + "\n"


def test_log_errors_time_range_head_and_tail() -> None:
    e = explore(_log(1000), max_tokens=400)
    _within(e, 400)
    assert e.kind == "log"
    assert e.stats["error_lines"] == 20 and e.stats["warning_lines"] == 40 and e.stats["exception_lines"] == 2
    s = e.summary
    assert "2024-03-01 10:00:00,123 → 2024-03-01 10:16:39,123" in s
    assert "L1: 2024-03-01 10:00:00,123 ERROR worker-0 job 0 db timeout after 0s" in s
    assert "L1001: Traceback (most recent call last):" in s and "L1003: ValueError: bad" in s
    assert "tail:" in s


def test_markdown_headings_skip_code_fences() -> None:
    text = ("# Title\n\nIntro with a [link](http://x).\n\n## Install\n\n- step one\n- step two\n\n"
            "```sh\n# not a heading\n```\n\n## Usage\n\nMore **bold** text.\n")
    e = explore(text, max_tokens=200)
    _within(e, 200)
    assert e.kind == "text" and e.stats["format"] == "markdown"
    assert "L1 # Title" in e.summary and "L5 ## Install" in e.summary and "L14 ## Usage" in e.summary
    assert "# not a heading" not in e.summary.split("head:")[0]


@pytest.mark.parametrize(("text", "words"), [
    ("# 第一章\n\n我们决定采用新的缓存策略。\n\n## 第二章\n\n周五之前完成测试。\n", "28 words (a CJK character counts as one)"),
    ("# 東京\n\n寿司を食べました。\n", "11 words (a CJK character counts as one)"),
    ("# 학교\n\n서울에서 친구를 만났어요.\n", "5 words ·"),  # hangul: by spaces
    ("# Notes\n\nWe use Redis 7 (缓存) here.\n", "11 words ·"),
])
def test_word_count_reads_chinese_and_japanese_by_character(text: str, words: str) -> None:
    e = explore(text, max_tokens=200, hint="md")
    assert f"~{words}" in e.summary, e.summary


def test_plain_text_head_middle_tail_with_line_numbers() -> None:
    text = "\n".join(f"Line {i} of a long and uneventful story." for i in range(1, 201))
    e = explore(text, max_tokens=500)
    _within(e, 500)
    assert e.kind == "text"
    assert "L1: Line 1 of" in e.summary and "middle:" in e.summary and "L200: Line 200 of" in e.summary


def test_html_and_xml() -> None:
    page = ("<!DOCTYPE html><html><head><title>Report &amp; notes</title></head><body><h1>Main</h1>"
            "<p>Hello <a href='#'>there</a></p><h2>Details</h2><table></table></body></html>")
    e = explore(page)
    assert e.kind == "html" and "title: Report & notes" in e.summary and "h2 Details" in e.summary
    xml = '<?xml version="1.0"?>\n<catalog>\n' + "".join(
        f'  <book id="{i}"><title>T{i}</title></book>\n' for i in range(30)) + "</catalog>\n"
    e = explore(xml)
    assert e.kind == "xml" and e.stats["root"] == "catalog" and "<book> ×30" in e.summary


def test_prose_with_commas_is_not_csv() -> None:
    assert explore("Hello, world.\nHow are you, friend?\nFine, thanks.\nAnd you, then?\n").kind == "text"


def test_detect_kind_and_bad_budget() -> None:
    assert detect_kind('{"a": 1}') == "json"
    assert detect_kind("x,y\n1,2\n3,4\n5,6\n") == "csv"
    with pytest.raises(ValidationError):
        explore("x", max_tokens=0)


def test_odd_inputs_fall_back_to_text() -> None:
    for text in ("", "   \n\n", "{", "[1, 2", "{" * 100_000, "[" * 100_000, "<" * 1000, "\x00\x01\x02",
                 "\ud800 lone surrogate", "😀" * 5000, "a" * 300_000):
        e = explore(text, max_tokens=100)
        _within(e, 100)
    assert explore("{not json at all").kind == "text"


def test_tiny_budgets_still_fit() -> None:
    for budget in (1, 2, 5, 20):
        _within(explore(json.dumps(_users(50)), max_tokens=budget), budget)
        _within(explore(_log(100), max_tokens=budget), budget)


def test_other_counters() -> None:
    counter = EstimatingCounter()
    e = explore(_log(500), max_tokens=120, counter=counter)
    assert counter.count(e.summary) <= 120


# -- big inputs ----------------------------------------------------------------------------

def _big_json(chars: int) -> str:
    rnd = random.Random(3)
    items = [{"id": i, "name": f"user {i}", "score": rnd.random(), "addr": {"city": "Porto", "zip": str(4000 + i)}}
             for i in range(chars // 80)]
    return json.dumps({"meta": {"n": len(items)}, "items": items})


def test_ten_megabyte_json_is_bounded() -> None:
    text = _big_json(10_000_000)
    assert len(text) > 8_000_000
    started = time.perf_counter()
    e = explore(text)
    print(f"10 MB JSON explored in {time.perf_counter() - started:.2f} s")
    _within(e, 600)
    assert e.kind == "json" and '"items": array[' in e.summary and "tokens" not in e.stats


def test_ten_megabyte_json_array_is_sampled() -> None:
    items = [{"i": i, "payload": "x" * 40} for i in range(200_000)]
    text = json.dumps(items)
    e = explore(text)
    _within(e, 600)
    assert e.kind == "json" and e.summary.startswith("JSON array")


def test_ten_megabyte_log_is_bounded() -> None:
    text = _log(200_000)
    assert len(text) > 10_000_000
    started = time.perf_counter()
    e = explore(text, hint="service.log")
    print(f"10 MB log explored in {time.perf_counter() - started:.2f} s")
    _within(e, 600)
    assert e.kind == "log" and e.stats["error_lines"] == 4000 and e.stats["lines"] == 200_003


# -- properties ----------------------------------------------------------------------------

_ODD = st.text(alphabet=st.characters(codec="utf-8"), max_size=3000)
_STRUCTURED = st.one_of(
    st.lists(st.sampled_from(["{", "}", "[", "]", ",", ":", '"', "\n", "\t", " ", "a", "1", "-", "#", "<", ">",
                              "/", "ERROR", "def ", "key: ", "2024-01-01 10:00:00 ", "😀", "数据", "\\"]),
             max_size=400).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                 lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
                 max_leaves=40).map(json.dumps),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(_ODD, _STRUCTURED), max_tokens=st.integers(1, 400),
       hint=st.none() | st.sampled_from(["a.json", "b.csv", "c.tsv", "d.yaml", "e.py", "f.go", "g.log", "h.md",
                                         "i.html", "j.xml", "read_file", "logs"]))
def test_explore_never_raises_and_fits(text: str, max_tokens: int, hint: str | None) -> None:
    e = explore(text, max_tokens=max_tokens, hint=hint)
    _within(e, max_tokens)
    assert e.stats["chars"] == len(text)
    json.dumps(e.as_dict())  # JSON-ready
