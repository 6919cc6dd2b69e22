"""Listeners and drawings of a run: terminal, JUnit, GitHub, OpenTelemetry, graphs."""
