#!/bin/sh
# The fake `claude` of the migration equivalence harness, fast path (scripts/migrate_equiv.py
# installs it as the sandbox's `claude`, with tests/migrate/equiv/claude beside it as
# `claude-full`). A prompt step's call with no `--json-schema` and no EQ_TEXT gets here the
# very bytes `claude-full` prints for it, without starting an interpreter (a corpus loop calls
# `claude` up to ~90 times); every other call (the judge's, EQ_TEXT set) goes to `claude-full`.
fmt=
prev=
stdin=1
for arg in "$@"; do
  if [ "$prev" = --output-format ] && [ -z "$fmt" ]; then fmt=$arg; fi
  case $arg in
    --version) echo "2.0.0 (Claude Code)"; exit 0 ;;
    --json-schema | --json-schema=*) exec python3 "${0%/*}/claude-full" "$@" ;;
    --output-format=*) [ -z "$fmt" ] && fmt=${arg#--output-format=} ;;
    -p | --print) stdin=0 ;;
  esac
  prev=$arg
done
if [ -n "${EQ_TEXT+set}" ]; then exec python3 "${0%/*}/claude-full" "$@"; fi
if [ "$stdin" = 1 ]; then cat > /dev/null; fi
result='{"type": "result", "subtype": "success", "is_error": false, "duration_ms": 5, "num_turns": 1, "result": "done", "session_id": "eq", "total_cost_usd": 0.0, "usage": {"input_tokens": 1, "output_tokens": 1}}'
case $fmt in
  stream-json)
    echo '{"type": "system", "subtype": "init", "session_id": "eq", "model": "claude-fake", "tools": []}'
    echo '{"type": "assistant", "session_id": "eq", "parent_tool_use_id": null, "message": {"role": "assistant", "model": "claude-fake", "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}}'
    echo "$result" ;;
  json) echo "$result" ;;
  *) echo done ;;
esac
