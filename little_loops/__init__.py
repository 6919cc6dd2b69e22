"""little-loops: run finite-state loops written in YAML."""

__version__ = "0.1.0"
