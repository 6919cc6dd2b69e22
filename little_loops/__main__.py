"""`python -m little_loops` is `ll`."""

from .entry import main

main()
