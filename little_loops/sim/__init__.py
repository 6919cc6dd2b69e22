"""Simulation: scripted answers in place of actions, `ll step` and `ll test`."""
