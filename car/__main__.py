"""The `car` command and `python -m car`.

Importing the command line takes a moment (typer, rich): a Ctrl-C pressed then is `car:
interrupted` (exit 130), as it is once the command runs, not a traceback of the import.
"""

import sys


def run() -> None:
    try:
        from car.cli import main
    except KeyboardInterrupt:
        print("car: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    main()


if __name__ == "__main__":
    run()
