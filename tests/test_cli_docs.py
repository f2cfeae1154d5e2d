"""The CLI documents itself: every command in the README's CLI section, and an example at
the end of every command's --help."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lossless.cli import main
from lossless.cli.examples import walk_commands
from lossless.cli.main import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def _cli_section() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"^## CLI\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert found, "README.md has no '## CLI' section"
    return found.group(1)


def test_every_command_and_subcommand_is_in_the_readme_cli_section() -> None:
    section = _cli_section()
    missing = [name for name, _ in walk_commands(build_parser())
               if not re.search(rf"`lossless {re.escape(name)}(?=[ `])", section)]
    assert not missing, f"README.md's CLI section does not mention: {', '.join(f'lossless {m}' for m in missing)}"


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
