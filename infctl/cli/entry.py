"""The ``infctl`` executable's entry point: ``--version`` answered before anything heavy is imported."""

from __future__ import annotations

import sys


def run() -> None:
    if sys.argv[1:] == ["--version"]:  # scripts call this often; Typer alone costs ~0.1 s to import
        from infctl import __version__

        print(f"infctl {__version__}")
        return
    from infctl.cli.main import run as main

    main()
