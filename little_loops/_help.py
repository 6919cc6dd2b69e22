"""`ll --help`, as click renders it at 80 columns; made by scripts/gen_help.py."""

HELP = """\
Usage: ll [OPTIONS] COMMAND [ARGS]...

  Run loops: finite-state machines written in YAML. Each state runs a shell or
  Claude Code command, an evaluator turns the result into a verdict, and the
  verdict picks the next state.

  Examples:
    ll init my-loop && ll validate my-loop.yaml && ll run my-loop.yaml
    ll run loops/fix-until-green.yaml --max-iterations 10
    ll resume            # continue the latest interrupted run here

  Each command has --help with an example. Docs: docs/getting-started.md.

Options:
  --version   Show the version and exit.
  -h, --help  Show this message and exit.

Commands:
  answer       Answer a question of a waiting or suspended run.
  compile      Print the states a paradigm file compiles to.
  graph        Draw a loop's states and routes (Mermaid or DOT).
  history      Past runs with their outcomes, newest first.
  init         Write a commented starter loop.
  join         Gather branch runs of other jobs into a run and resume it.
  judge        Measure a judge on labelled cases; explain a verdict.
  list         List the newest runs in this directory.
  logs         Show a run's events (-f: follow), or a step's output.
  migrate      Convert upstream little-loops files to this format, with notes.
  plan-matrix  Print a fork's items as a GitHub Actions matrix.
  prune        Delete old runs; never a running or suspended one.
  report       Write a run's report: one self-contained HTML page.
  resume       Continue an interrupted run from its last finished step.
  run          Run a loop until a terminal state or a limit.
  schema       Print the JSON Schema of loop files, for editors.
  status       Show where a run is, its last verdicts and its cost.
  step         Run N steps (default 1) or up to a state, then pause (exit 6).
  stop         Stop a running loop from any terminal.
  test         Run loops' simulation scripts and check `expect:`.
  validate     Check loop files; report every problem at its line.
"""
