"""The engine: the runner, its step kinds, child runs, forks, questions, the session, resume."""
