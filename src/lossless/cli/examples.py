"""Examples shown at the end of each command's ``--help`` (the argparse epilog).

Kept apart from the argument definitions so every command, including those registered by
other modules, gets one in the same place; ``tests/test_cli_docs.py`` checks none is
missing.
"""

from __future__ import annotations

import argparse

__all__ = ["EXAMPLES", "add_examples", "walk_commands"]

EXAMPLES: dict[str, tuple[str, ...]] = {
    "add": ('lossless add support-42 --role user "The depot code is ZX-41"',
            "echo 'long text' | lossless add support-42 --role assistant --external-id reply-7",
            'lossless add support-42 --role user --content "hi" --no-wait'),
    "import": ("lossless import chat.jsonl --conversation support-42",
               "lossless import ~/.claude/projects/-home-me-billing/3f1e9c2a.jsonl",
               "lossless import ~/Downloads/chatgpt/conversations.json",
               "lossless import notes.md --format text --conversation notes",
               "lossless import big.jsonl --no-wait   # a running `lossless worker` compacts and embeds"),
    "export": ("lossless export support-42 -o support-42.jsonl",
               "lossless export support-42 --format json | jq '.summaries | length'",
               "lossless export --all -o backup/"),
    "ls": ("lossless ls", "lossless --json ls | jq '.[].id'"),
    "show": ("lossless show support-42", "lossless show support-42 --levels 1 --tail 5",
             "lossless show support-42 --messages"),
    "assemble": ("lossless assemble support-42 --budget 8000",
                 'lossless assemble support-42 --budget 4000 --query "which port did the API move to"'),
    "grep": ('lossless grep support-42 "ZX-41"', 'lossless grep --all "ERR_42[0-9]+" --regex --scope messages'),
    "search": ('lossless search support-42 "when is the migration"',
               'lossless search --where user=maya "deploy checklist" --mode fts'),
    "embed": ("lossless embed support-42", "lossless embed --all"),
    "describe": ("lossless describe sum_3f9a1c2b", "lossless describe msg_0c1d2e3f"),
    "expand": ("lossless expand sum_3f9a1c2b --max-tokens 2000", "lossless expand sum_3f9a1c2b --to sources"),
    "compact": ("lossless compact support-42", "lossless --window 8192 compact support-42 --full",
                "lossless compact --all --redo-fallbacks"),
    "doctor": ("lossless doctor", "lossless doctor --quick   # without loading the embedding model",
               "lossless --db postgresql://me@db/lossless --json doctor | jq '.checks[] | select(.status != \"ok\")'"),
    "worker": ("lossless worker", "lossless --db postgresql://me@db/lossless worker --slice 5",
               "lossless worker --once"),
    "stats": ("lossless stats support-42", "lossless stats support-42 --plot compression.png", "lossless stats"),
    "verify": ("lossless verify", "lossless verify support-42"),
    "erase": ('lossless erase support-42 --message 17 --reason "GDPR request #881" --by dpo@example.com',
              'lossless erase support-42 --yes --reason "customer closed the account"',
              "lossless erase support-42 --list"),
    "demo": ("lossless demo", "lossless demo --lang zh   # the Chinese conversation",
             "lossless demo --window 4096 --budget 2000"),
    "memory": ('lossless memory add "Maya prefers metric units" --kind preference --user maya',
               'lossless memory search "units" --user maya'),
    "memory add": ('lossless memory add "Maya prefers metric units" --kind preference --user maya',),
    "memory search": ('lossless memory search "units" --user maya --limit 5',),
    "memory ls": ("lossless memory ls --user maya --order importance",),
    "memory forget": ("lossless memory forget --user maya --older-than 90d --dry-run",
                      "lossless memory forget --policy --dry-run"),
    "memory forgotten": ("lossless memory forgotten --limit 20",),
    "memory restore": ("lossless memory restore mem_3f2a9c1d0e4b5a6c7d8e",),
    "migrate": ("lossless migrate --from ~/.local/share/lossless/lossless.db --to postgresql://me@localhost/lossless",),
    "index": ("lossless index src docs", "lossless index . --include '*.py' --exclude 'tests/*'"),
    "files": ('lossless files search "retry budget"', "lossless files ls --path 'src/*'"),
    "files search": ('lossless files search "retry budget" --kind code --limit 5',
                     'lossless files search "the pagination cursor" --max-distance 0.6 --min-relevance 0.7'),
    "files ls": ("lossless files ls --path 'docs/*'",),
    "files rm": ("lossless files rm docs/old.md",),
    "files stats": ("lossless files stats",),
    "serve": ("lossless serve --port 8080", "lossless serve --upstream https://api.openai.com/v1"),
    "mcp": ("lossless mcp", "lossless mcp --transport http --port 8765"),
    "keys": ("lossless keys create --tenant acme", "lossless keys ls"),
    "keys create": ("lossless keys create --tenant acme --name ci",),
    "keys ls": ("lossless keys ls --tenant acme",),
    "keys revoke": ("lossless keys revoke key_1a2b3c",),
    "keys adopt": ("lossless keys adopt --tenant acme support-1 support-2", "lossless keys adopt --tenant acme --all-unowned"),
}


class _ExamplesFormatter(argparse.HelpFormatter):
    """Wraps the description as usual but prints the examples block line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        head, marker, examples = text.partition("examples:\n")
        filled = super()._fill_text(head, width, indent) if head.strip() else ""
        if not marker:
            return filled
        block = "\n".join(indent + line for line in ("examples:", *examples.splitlines()))
        return f"{filled}\n\n{block}" if filled else block


def walk_commands(parser: argparse.ArgumentParser,
                  prefix: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand under ``parser``: ``("memory add", its parser)``."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = (*prefix, name)
                found.append((" ".join(path), sub))
                found.extend(walk_commands(sub, path))
    return found


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Put each command's examples at the end of its help (kept if it already has some)."""
    for name, sub in walk_commands(parser):
        lines = EXAMPLES.get(name)
        if not lines or (sub.epilog and "example" in sub.epilog.lower()):
            continue
        block = "examples:\n" + "\n".join(f"  {line}" for line in lines)
        sub.epilog = f"{sub.epilog}\n\n{block}" if sub.epilog else block
        raw = isinstance(sub.formatter_class, type) and issubclass(sub.formatter_class,
                                                                   argparse.RawDescriptionHelpFormatter)
        if not raw:
            sub.formatter_class = _ExamplesFormatter
