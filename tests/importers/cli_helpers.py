from __future__ import annotations

from car.cli import main


def run(args: list[str]) -> int:
    """Run the command line in-process; its exit code (0 when it returns normally)."""
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
