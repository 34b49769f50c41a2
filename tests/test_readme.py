"""Every ```python block of README.md runs verbatim, each in a fresh namespace, from the
repository root (the blocks read ../shared/data relative to it and write into temporary
directories of their own). A block that reads an absent data file is skipped, naming it."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

README = REPO / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
DATA_FILE = re.compile(r"""["'](\.\./shared/data/[^"']+)["']""")


def python_blocks() -> list[tuple[int, str]]:
    """(line of the first code line, code) of each block."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


BLOCKS = python_blocks()


def test_the_readme_has_python_blocks():
    # Without this, a changed fence would leave nothing to parametrize over, and pass.
    assert BLOCKS, f"no ```python block found in {README}"


@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_readme_block_runs(line: int, code: str, monkeypatch: pytest.MonkeyPatch):
    absent = [p for p in DATA_FILE.findall(code) if not (REPO / p).is_file()]
    if absent:
        pytest.skip(f"the block at README.md:{line} reads {(REPO / absent[0]).resolve()}, which is absent")
    monkeypatch.chdir(REPO)
    # Padding to the block's line: a traceback points at the README's own line numbers.
    compiled = compile("\n" * (line - 1) + code, str(README), "exec")
    exec(compiled, {"__name__": "__readme__"})

