"""Every ```python block of README.md and of the documentation site (docs/, every page, at any
depth) runs verbatim, each in a fresh namespace, from the repository root (the blocks read
../shared/data relative to it and write into temporary directories of their own). A block that
reads an absent data file is skipped, naming it. The README stays short: at most README_LINES
lines. Each `gpudvfs` command line in a ```bash block, those that need a GPU included, names a
command that exists, with options it takes (test_doc_chains.py runs the others). Every page of
docs/ is in the site's navigation (mkdocs.yml)."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
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
SHELL_BLOCK = re.compile(r"^```(?:bash|console|shell)\n(.*?)^```$", re.S | re.M)


def command_lines() -> list[tuple[str, int, list[str]]]:
    """(page, line, arguments after `gpudvfs`) of each gpudvfs command in a shell block."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = str(page.relative_to(REPO))
        for m in SHELL_BLOCK.finditer(text):
            first = text.count("\n", 0, m.start(1)) + 1
            for i, line in enumerate(m.group(1).splitlines()):
                for part in re.split(r"&&|\|\||[|;]", line.split(" #")[0]):
                    words = shlex.split(part, comments=True)
                    if words[:1] == ["sudo"]:
                        words = words[1:]
                    if words[:1] == ["gpudvfs"]:
                        out.append((name, first + i, words[1:]))
    return out


COMMANDS = command_lines()


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



def test_every_docs_page_is_in_the_nav():
    # mkdocs --strict (CI) refuses a page left out of the nav too; this says it without mkdocs.
    nav = set(re.findall(r"^\s*- .*?([\w./-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


@pytest.mark.parametrize(("page", "line", "args"), COMMANDS, ids=[f"{page}:{line}" for page, line, _ in COMMANDS])
def test_shell_block_commands_exist(page: str, line: int, args: list[str]):
    click = pytest.importorskip("click")
    from gpudvfs.cli.app import cli

    cmd, path = cli, ["gpudvfs"]
    while isinstance(cmd, click.Group) and args and args[0] in cmd.commands:
        cmd, args = cmd.commands[args[0]], args[1:]
        path.append(cmd.name)
    assert not isinstance(cmd, click.Group) or not args or args[0].startswith("-"), \
        f"{page}:{line}: {' '.join(path)} has no command {args[0]!r}"
    names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    if "--" in args:  # what follows is another program's command line
        args = args[:args.index("--")]
    unknown = [a.split("=")[0] for a in args if a.startswith("-") and a.split("=")[0] not in names
               and not re.fullmatch(r"-[\d.]+", a)]
    assert not unknown, f"{page}:{line}: {' '.join(path)} takes no option {unknown}"
