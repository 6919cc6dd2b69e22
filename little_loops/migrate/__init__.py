"""`ll migrate`: upstream little-loops files converted to this format."""
