"""The code blocks of the README and the docs' guides and recipes, as the docs tests run them.

A block is a fenced ```python block, or a ```sh / ```console block whose first command starts
with ``acp-fast `` (in ```console blocks the commands are the lines starting with ``$ ``; the
other lines are output, shown for the reader). A block preceded by ``<!-- not run: REASON -->``
(the last non-blank line before its fence) is not run: it needs something a fresh machine does
not have (a real agent such as gemini); those are counted and reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<lang>[\w+-]*)[^`]*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
SHELL_LANGS = frozenset({"sh", "bash", "shell", "console"})


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str  # the block's lines, the fence's indentation removed
    not_run: str | None  # the reason given in a preceding `<!-- not run: ... -->`

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        """ "python", "cli" (a shell block of acp-fast commands) or None (not an example)."""
        if self.lang == "python":
            return "python"
        if self.lang in SHELL_LANGS:
            commands = self.commands()
            if commands and commands[0].startswith("acp-fast "):
                return "cli"
        return None

    def commands(self) -> list[str]:
        """A shell block's command lines: ``$ `` lines for console blocks, else every line that
        is not blank or a comment."""
        lines = self.text.splitlines()
        if self.lang == "console":
            return [line[2:] for line in lines if line.startswith("$ ")]
        return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]

    def script(self) -> str:
        """What the shell runs: the commands, stopping at the first that fails."""
        if self.lang == "console":
            return "set -e\n" + "\n".join(self.commands()) + "\n"
        return "set -e\n" + self.text


def doc_files() -> list[Path]:
    """README.md, then every guide and recipe page, in name order."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs" / "guide").glob("*.md")),
        *sorted((ROOT / "docs" / "recipes").glob("*.md")),
    ]


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, with the not-run marker before it, if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            candidate = lines[end]
            if candidate.strip() == ticks and candidate.startswith(indent):
                break
            body.append(candidate[len(indent) :] if candidate.startswith(indent) else candidate)
            end += 1
        else:
            raise ValueError(f"{path}:{index + 1}: a code block that is never closed")
        previous = index - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        marker = _NOT_RUN.match(lines[previous]) if previous >= 0 else None
        found.append(
            Block(
                path=path,
                line=index + 1,
                lang=opening["lang"].lower(),
                text="\n".join(body) + "\n",
                not_run=None if marker is None else marker["reason"],
            )
        )
        index = end + 1
    return found


def examples() -> list[Block]:
    """Every runnable example (and every marked one) of the README, guides and recipes."""
    return [block for path in doc_files() for block in blocks_of(path) if block.kind is not None]
