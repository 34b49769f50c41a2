"""Every ```python block of README.md and of docs/*.md runs verbatim, each in a fresh
namespace, from the repository root (the blocks read ../shared/data relative to it and write
into temporary directories of their own). A block that reads an absent data file is skipped,
naming it. The README stays short: at most README_LINES lines."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_LINES = 250
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
DATA_FILE = re.compile(r"""["'](\.\./shared/data/[^"']+)["']""")


def python_blocks() -> list[tuple[str, int, str]]:
    """(page, line of the first code line, code) of each block."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(REPO))
        out += [(name, text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]
    return out


BLOCKS = python_blocks()


def test_the_readme_has_python_blocks_and_stays_short():
    # Without this, a changed fence would leave nothing to parametrize over, and pass.
    assert any(page == "README.md" for page, _, _ in BLOCKS), f"no ```python block found in {README}"
    assert len(README.read_text(encoding="utf-8").splitlines()) <= README_LINES


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS, ids=[f"{page}:{line}" for page, line, _ in BLOCKS])
def test_readme_block_runs(page: str, line: int, code: str, monkeypatch: pytest.MonkeyPatch):
    absent = [p for p in DATA_FILE.findall(code) if not (REPO / p).is_file()]
    if absent:
        pytest.skip(f"the block at {page}:{line} reads {(REPO / absent[0]).resolve()}, which is absent")
    monkeypatch.chdir(REPO)
    # Padding to the block's line: a traceback points at the page's own line numbers.
    compiled = compile("\n" * (line - 1) + code, str(REPO / page), "exec")
    exec(compiled, {"__name__": "__readme__"})

