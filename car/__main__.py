"""The `car` command and `python -m car`.

Importing the command line takes a moment (typer, rich): a Ctrl-C pressed then is `car:
interrupted` (exit 130), and a SIGTERM `car: terminated` (exit 143), as they are once the command
runs, not a traceback of the import or a silent death.
"""

import signal
import sys
from types import FrameType


class _Terminated(Exception):
    """SIGTERM arrived before the command line had installed its own handler."""


def _terminate_early(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def run() -> None:
    signal.signal(signal.SIGTERM, _terminate_early)  # `car.cli.main` replaces it with its own
    try:
        from car.cli import main

        main()
    except KeyboardInterrupt:
        print("car: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except _Terminated:
        print("car: terminated", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:  # the command is over: a SIGTERM now ends the process as it would any other
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    run()
