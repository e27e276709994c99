"""`python -m cli ...`: the `understudy` command from a source tree (the GPU host runs it so, uninstalled)."""

from cli.main import main

main()
