"""Frozen records of a loop and a run, and the pure router."""
