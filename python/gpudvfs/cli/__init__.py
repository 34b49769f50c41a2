"""The ``gpudvfs`` command. Needs the ``cli`` extra (click, rich).

Exit status: 0 success, 2 bad input or a device that refuses (one ``gpudvfs: error:`` line),
130 interrupted (Ctrl-C, also while the command is still starting up).
"""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def main(argv: list[str] | None = None) -> None:
    """Run the ``gpudvfs`` command (on ``argv``, else the process's arguments) and exit with its status."""
    try:
        sys.exit(_run(argv))
    except KeyboardInterrupt:
        print("gpudvfs: interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED)


def _run(argv: list[str] | None) -> int:
    # Imports stay inside: Ctrl-C while click, rich and numpy load is still an interrupt.
    try:
        import click

        from gpudvfs.cli.app import cli
    except ImportError as e:  # the core package works without the CLI's dependencies
        package = (e.name or "a package").partition(".")[0]  # rich, not rich.console
        print(f"gpudvfs: the command line needs the 'cli' extra ({package} is missing): "
              "pip install 'gpudvfs[cli]'", file=sys.stderr)
        return 2
    try:
        rv = cli.main(args=argv, prog_name="gpudvfs", standalone_mode=False)
    except click.Abort:  # click's form of KeyboardInterrupt (and of EOF at a prompt)
        raise KeyboardInterrupt from None
    except click.ClickException as e:  # usage errors, in gpudvfs's form (`output.Group`): status 2
        e.show()
        return e.exit_code
    return rv if isinstance(rv, int) else 0
