"""`python -m hivemind` is the `hivemind` command."""

from hivemind.cli.app import main

main()
