#!/usr/bin/env bash
# Refresh constraints/test.txt: install '.[test]' into a fresh virtualenv with the newest releases
# that pyproject.toml allows, and pin every package it installed (the project itself excepted).
# Usage, from anywhere in the checkout:  bash scripts/refresh-pins.sh
# Then run the suite through the new pins and commit the file with what changed in the message.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
"$python" -m venv "$venv"
"$venv/bin/pip" install -q -e '.[test]'
{
  echo "# Every package that \`pip install -e '.[test]'\` installs, pinned: the README's test command"
  echo "# and .ci/run install through this file (pip install -c constraints/test.txt ...)."
  echo "# Made by scripts/refresh-pins.sh with $("$venv/bin/python" -V); do not edit by hand."
  "$venv/bin/pip" freeze --exclude-editable | grep -viE '^(little-loops-fsm|-e )'
} >constraints/test.txt.new
mv constraints/test.txt.new constraints/test.txt
echo "constraints/test.txt: $(grep -vc '^#' constraints/test.txt) packages pinned"
