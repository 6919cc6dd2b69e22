"""`python -m little_loops` is `ll`."""

from .cli import main

main()
