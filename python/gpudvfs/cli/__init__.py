"""The ``gpudvfs`` command. Needs the ``cli`` extra (click, rich)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from .app import cli
    except ImportError as e:  # the core package works without the CLI's dependencies
        sys.exit(f"gpudvfs: the command line needs the 'cli' extra ({e.name} is missing): "
                 "pip install 'gpudvfs[cli]'")
    cli()
