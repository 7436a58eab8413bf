"""`compilediag` and `python -m compilediag`. A run command's worker is started first of
all, so that its torch import overlaps the CLI's own start (typer, the option checks)."""

import sys


def main() -> None:
    from compilediag.harness.spawn import start_early

    start_early(sys.argv[1:])
    from compilediag.cli.app import main as cli

    cli()


if __name__ == "__main__":
    main()
