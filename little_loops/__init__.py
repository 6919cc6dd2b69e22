"""little-loops: run finite-state loops written in YAML.

The interface is the `ll` command and the file formats (README.md, "Public interface"); this
package exports its version only, and its modules may change in any release.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
