"""The CLI documents itself: every command and subcommand in docs/cli.md, with every option
it takes, and an example at the end of every command's --help."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lossless.cli import main
from lossless.cli.examples import walk_commands
from lossless.cli.main import build_parser

CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
# options every command takes (from the shared parent parser): documented once, under
# "Global options", not on every command's line
SHARED = {"-h", "--help", "--db", "--window", "--model", "--summarizer", "--summarizer-model",
          "--json", "--debug"}


def _cli_doc() -> str:
    assert CLI_DOC.is_file(), "docs/cli.md is missing"
    return CLI_DOC.read_text(encoding="utf-8")


def _mentions(name: str) -> re.Pattern[str]:
    return re.compile(rf"`lossless {re.escape(name)}(?=[ `])")


def test_every_command_and_subcommand_is_in_docs_cli() -> None:
    text = _cli_doc()
    missing = [name for name, _ in walk_commands(build_parser()) if not _mentions(name).search(text)]
    assert not missing, f"docs/cli.md does not mention: {', '.join(f'lossless {m}' for m in missing)}"


def _own_options(parser: argparse.ArgumentParser) -> list[list[str]]:
    """Each option of this command but the shared ones, as its spellings (``-o``, ``--output``)."""
    return [action.option_strings for action in parser._actions
            if action.option_strings and not SHARED.intersection(action.option_strings)]


def test_every_option_of_a_command_is_on_its_lines_in_docs_cli() -> None:
    lines = _cli_doc().splitlines()
    undocumented = []
    for name, sub in walk_commands(build_parser()):
        pattern = _mentions(name)
        own = "\n".join(line for line in lines if pattern.search(line))
        undocumented += [f"lossless {name} {'/'.join(spellings)}" for spellings in _own_options(sub)
                         if not any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", own)
                                    for flag in spellings)]
    assert not undocumented, f"options missing from docs/cli.md: {', '.join(undocumented)}"


def test_global_options_are_in_docs_cli() -> None:
    text = _cli_doc()
    missing = [flag for flag in sorted(SHARED - {"-h", "--help"}) if flag not in text]
    assert not missing, f"docs/cli.md does not document: {', '.join(missing)}"


def test_every_command_help_ends_with_examples() -> None:
    without = [name for name, sub in walk_commands(build_parser())
               if "examples:\n  lossless " not in sub.format_help()]
    assert not without, f"no examples in --help of: {', '.join(without)} (add them to lossless/cli/examples.py)"


@pytest.mark.parametrize("command", ["import", "export", "show", "stats"])
def test_help_examples_name_their_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    examples = out.split("examples:\n", 1)[1].splitlines()
    assert examples and all(line.strip().startswith(f"lossless {command}") for line in examples if line.strip())
