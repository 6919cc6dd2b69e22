"""A loop file's path -> the frozen `Loop`: read, compose, check, build."""
