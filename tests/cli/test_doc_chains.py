"""Every ```bash block of README.md and docs/ runs, each page's blocks in order as one chain in one
temporary working directory (a file one command writes, the next reads), unless an HTML comment
on the line above marks it:

- ``<!-- gpu-only: why -->``: needs a GPU, NVML, root or a Ray cluster; not run here (its
  `gpudvfs` lines are still checked against the commands' options, tests/cli/test_readme.py).
- ``<!-- ci: why -->``: .ci/run runs its lines, verbatim and in this order.
- ``<!-- stand-in: NAME=PATH ... -->``: the block runs on the repository's file PATH copied to
  NAME: a recorded profile stands in for the user's own (``app.ncu.csv``).

The working directory stands in for the repository root: ``validation/`` and ``../shared/data``
resolve there as the docs write them. `gpudvfs` commands run in this process; ``pip install`` is
skipped (the package is installed); any other line runs through bash, `gpudvfs` on its PATH. A
```text block right after a block is what its last command prints: its first lines, ``...``
standing for any lines.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, data_dir

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(?:^<!-- ([\w-]+):([^\n]*?)-->\n)?^```bash\n(.*?)^```\n(?:\n```text\n(.*?)^```$)?", re.S | re.M)
MARKS = {"gpu-only", "ci", "stand-in"}


@dataclass
class Block:
    page: str
    line: int
    mark: str | None
    note: str
    lines: list[str]
    shown: list[str] | None


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(str(page.relative_to(REPO)), text.count("\n", 0, m.start(3)), m.group(1), (m.group(2) or "").strip(),
                  m.group(3).splitlines(), m.group(4).splitlines() if m.group(4) is not None else None)
            for m in BLOCK.finditer(text)]


BLOCKS = [b for page in PAGES for b in blocks(page)]
CHAINS = {page: runnable for page in dict.fromkeys(b.page for b in BLOCKS)
          if (runnable := [b for b in BLOCKS if b.page == page and b.mark in (None, "stand-in")])}


def test_every_block_is_marked_with_a_known_mark_and_the_ci_blocks_are_what_ci_runs():
    # Without these, a changed fence would leave nothing to run or compare, and pass.
    assert {"docs/guides/predict.md", "docs/guides/fleet.md", "README.md"} <= CHAINS.keys()
    assert any(b.shown for b in CHAINS["docs/guides/predict.md"])
    for b in BLOCKS:
        assert b.mark in MARKS | {None}, f"{b.page}:{b.line}: unknown mark <!-- {b.mark}: -->"
        assert b.mark is None or b.note, f"{b.page}:{b.line}: <!-- {b.mark}: --> says why"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    ci_lines = [line for b in BLOCKS if b.mark == "ci" for line in b.lines]
    assert ci_lines, "README.md's quickstart is marked <!-- ci: -->"
    at = [ci.index(line) if line in ci else -1 for line in ci_lines]
    assert -1 not in at and at == sorted(at), f".ci/run runs {ci_lines} in this order"


def _commands(line: str) -> list[list[str]] | None:
    """The line's commands (split at ``&&`` and ``;``), or None where it needs a shell (a pipe, ``||``)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    words, out = list(lex), [[]]
    for w in words:
        if w in ("&&", ";"):
            out.append([])
        elif w in ("|", "||", "<", "&", "(", ")"):
            return None
        else:
            out[-1].append(w)
    return [c for c in out if c]


def _gpudvfs(args: list[str], cwd: Path) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    target = None
    if ">" in args:
        args, target = args[:args.index(">")], args[args.index(">") + 1]
    r = CliRunner().invoke(cli, args, terminal_width=200, prog_name="gpudvfs")
    if target is not None:
        (cwd / target).write_text(r.stdout)
    crash = r.exc_info and not isinstance(r.exception, SystemExit)
    return r.exit_code, r.stdout, r.stderr + ("".join(traceback.format_exception(*r.exc_info)) if crash else "")


def _shell(line: str, cwd: Path) -> tuple[int, str, str]:
    bin_ = cwd.parent / "bin"
    if not bin_.is_dir():
        bin_.mkdir()
        (bin_ / "gpudvfs").write_text(f'#!/bin/sh\nexec "{sys.executable}" -c '
                                      '"from gpudvfs.cli import main; main()" "$@"\n')
        (bin_ / "gpudvfs").chmod(0o755)
    import gpudvfs

    package = str(Path(gpudvfs.__file__).parents[1])
    env = os.environ | {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}",
                        "PYTHONPATH": os.pathsep.join(filter(None, (package, os.environ.get("PYTHONPATH"))))}
    r = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout, r.stderr


def run_line(line: str, cwd: Path) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of one line of a block; (0, "", "") for ``pip install`` alone."""
    commands = _commands(line)
    if commands is not None and all(c[0] == "gpudvfs" or c[:2] == ["pip", "install"] for c in commands):
        status, out, err = 0, "", ""
        for c in commands:
            if c[0] == "gpudvfs":
                status, out, err = _gpudvfs(c[1:], cwd)
                if status:
                    break
        return status, out, err
    return _shell(line, cwd)


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether ``printed`` begins with ``shown``, a line ``...`` standing for any lines."""
    printed = [p.rstrip() for p in printed]
    parts: list[list[str]] = [[]]
    for s in shown:
        if s == "...":
            parts.append([])
        else:
            parts[-1].append(s.rstrip())
    head, *rest = parts
    at = len(head)
    if printed[:at] != head:
        return False
    for want in rest:
        found = next((i for i in range(at, len(printed) - len(want) + 1) if printed[i:i + len(want)] == want), None)
        if found is None:
            return False
        at = found + len(want)
    return True


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder in place of the repository root: its validation/, and ../shared/data."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "validation").symlink_to(REPO / "validation")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(data_dir())
    monkeypatch.chdir(root)
    return root


@pytest.mark.parametrize("page", list(CHAINS))
def test_the_page_runs_as_a_chain(page: str, root: Path):
    absent = [f for b in CHAINS[page] for line in b.lines for f in re.findall(r"\.\./shared/data/[^\s\"']+", line)
              if not (root / f).exists()]
    if absent:
        pytest.skip(f"{page} reads {(root / absent[0]).resolve()}, which is absent (set GPUDVFS_DATA)")
    for b in CHAINS[page]:
        if b.mark == "stand-in":  # the user's file, stood in for by a recorded one
            for pair in b.note.split():
                name, path = pair.split("=")
                shutil.copy(REPO / path, root / name)
        out = ""
        for i, line in enumerate(b.lines, b.line + 1):
            if line.lstrip().startswith("#") or not line.strip():
                continue
            status, out, err = run_line(line, root)
            assert status == 0, f"{page}:{i}: `{line}` exited {status}:\n{out}\n{err}"
        if b.shown is not None:
            assert matches(b.shown, out.splitlines()), f"{page}:{b.line}: the block's last command prints:\n{out}"


def test_shown_output_elides_with_dots_and_fails_on_a_difference():
    printed = ["a", "b  ", "c", "d", "e"]
    assert matches(["a", "b"], printed) and matches(["a", "...", "d", "e"], printed)
    assert not matches(["b"], printed) and not matches(["a", "...", "e", "d"], printed)
    assert not matches(["a", "...", "x"], printed)


def test_the_completion_lines_of_the_docs_complete(root: Path):
    """docs/cli.md's line for bash, run in bash, completes `gpudvfs pre` as bash calls the function
    (the command, the word, the word before); zsh and fish are not installed here: their lines'
    scripts are checked as printed."""
    from click.testing import CliRunner

    from gpudvfs.cli.app import cli

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    lines = {shell: line for line, shell in re.findall(r"^(.*_GPUDVFS_COMPLETE=\w+_source gpudvfs.*?)\s+# (\w+)$",
                                                          text, re.M)}
    assert lines.keys() == {"bash", "zsh", "fish"}
    status, out, err = _shell(f'{lines["bash"]}\nCOMP_WORDS=(gpudvfs pre); COMP_CWORD=1\n'
                              '_gpudvfs_completion gpudvfs pre gpudvfs\necho "${COMPREPLY[@]}"', root)
    assert status == 0 and out.split() == ["predict"], err
    for shell in ("zsh", "fish"):
        var, value = re.search(r"(_GPUDVFS_COMPLETE)=(\w+)", lines[shell]).groups()
        r = CliRunner().invoke(cli, [], env={var: value}, prog_name="gpudvfs")
        assert r.exit_code == 0 and "_gpudvfs_completion" in r.stdout, r.output
