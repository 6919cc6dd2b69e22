"""The click commands of `ll`: options in, one core call, errors to exit codes."""
