"""Entry point for `python -m mtpverdict`."""

from mtpverdict.cli import main

main()
