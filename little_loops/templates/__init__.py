"""`${...}` placeholders and the shell quoting that makes their values safe."""
