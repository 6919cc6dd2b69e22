"""The `__init__` of every record of the package, by its source text: made by
scripts/gen_inits.py (see little_loops/model/records.py `_init`); do not edit. Each function
returns the `__init__` it defines, reading its defaults from the globals it is given."""

# (the names these functions read are the globals records.py gives them)


INITS = {}


def _0():
    def __init__(self):
        __d = self.__dict__
    return __init__

INITS['def __init__(self):\n    __d = self.__dict__\n'] = _0


def _1():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n"] = _1


def _2():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, action=_default_action, action_type=_default_action_type, log_at=_default_log_at):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['action'] = action
        __d['action_type'] = action_type
        __d['log_at'] = log_at
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, action=_default_action, action_type=_default_action_type, log_at=_default_log_at):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['action'] = action\n    __d['action_type'] = action_type\n    __d['log_at'] = log_at\n"] = _2


def _3():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, attempt=_default_attempt, delay_s=_default_delay_s, status=_default_status, error=_default_error):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['attempt'] = attempt
        __d['delay_s'] = delay_s
        __d['status'] = status
        __d['error'] = error
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, attempt=_default_attempt, delay_s=_default_delay_s, status=_default_status, error=_default_error):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['attempt'] = attempt\n    __d['delay_s'] = delay_s\n    __d['status'] = status\n    __d['error'] = error\n"] = _3


def _4():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, attempt=_default_attempt, delay_s=_default_delay_s, verdict=_default_verdict):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['attempt'] = attempt
        __d['delay_s'] = delay_s
        __d['verdict'] = verdict
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, attempt=_default_attempt, delay_s=_default_delay_s, verdict=_default_verdict):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['attempt'] = attempt\n    __d['delay_s'] = delay_s\n    __d['verdict'] = verdict\n"] = _4


def _5():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, child_run_id=_default_child_run_id, final_state=_default_final_state, outcome=_default_outcome, exit_code=_default_exit_code, verdict=_default_verdict, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd, outputs=_FACTORY, branch=_default_branch, reason=_default_reason):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['child_run_id'] = child_run_id
        __d['final_state'] = final_state
        __d['outcome'] = outcome
        __d['exit_code'] = exit_code
        __d['verdict'] = verdict
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['cost_usd'] = cost_usd
        __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs
        __d['branch'] = branch
        __d['reason'] = reason
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, child_run_id=_default_child_run_id, final_state=_default_final_state, outcome=_default_outcome, exit_code=_default_exit_code, verdict=_default_verdict, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd, outputs=_FACTORY, branch=_default_branch, reason=_default_reason):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['child_run_id'] = child_run_id\n    __d['final_state'] = final_state\n    __d['outcome'] = outcome\n    __d['exit_code'] = exit_code\n    __d['verdict'] = verdict\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['cost_usd'] = cost_usd\n    __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs\n    __d['branch'] = branch\n    __d['reason'] = reason\n"] = _5


def _6():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, error=_default_error, flags=_default_flags):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['error'] = error
        __d['flags'] = flags
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, error=_default_error, flags=_default_flags):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['error'] = error\n    __d['flags'] = flags\n"] = _6


def _7():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, event=_default_event):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['event'] = event
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, event=_default_event):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['event'] = event\n"] = _7


def _8():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, exit_code=_default_exit_code, duration_ms=_default_duration_ms, timed_out=_default_timed_out, output_bytes=_default_output_bytes):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['exit_code'] = exit_code
        __d['duration_ms'] = duration_ms
        __d['timed_out'] = timed_out
        __d['output_bytes'] = output_bytes
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, exit_code=_default_exit_code, duration_ms=_default_duration_ms, timed_out=_default_timed_out, output_bytes=_default_output_bytes):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['exit_code'] = exit_code\n    __d['duration_ms'] = duration_ms\n    __d['timed_out'] = timed_out\n    __d['output_bytes'] = output_bytes\n"] = _8


def _9():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, final_state=_default_final_state, outcome=_default_outcome, exit_code=_default_exit_code, steps=_default_steps, duration_ms=_default_duration_ms, error=_default_error, cost_usd=_default_cost_usd, outputs=_default_outputs):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['final_state'] = final_state
        __d['outcome'] = outcome
        __d['exit_code'] = exit_code
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['error'] = error
        __d['cost_usd'] = cost_usd
        __d['outputs'] = outputs
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, final_state=_default_final_state, outcome=_default_outcome, exit_code=_default_exit_code, steps=_default_steps, duration_ms=_default_duration_ms, error=_default_error, cost_usd=_default_cost_usd, outputs=_default_outputs):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['final_state'] = final_state\n    __d['outcome'] = outcome\n    __d['exit_code'] = exit_code\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['error'] = error\n    __d['cost_usd'] = cost_usd\n    __d['outputs'] = outputs\n"] = _9


def _10():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, from_=_default_from_, to=_default_to, verdict=_default_verdict, via=_default_via):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['from_'] = from_
        __d['to'] = to
        __d['verdict'] = verdict
        __d['via'] = via
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, from_=_default_from_, to=_default_to, verdict=_default_verdict, via=_default_via):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['from_'] = from_\n    __d['to'] = to\n    __d['verdict'] = verdict\n    __d['via'] = via\n"] = _10


def _11():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, kind=_default_kind, file=_default_file, child_run_id=_default_child_run_id, dir=_default_dir, attempt=_default_attempt, with_=_FACTORY, resumed=_default_resumed, branch=_default_branch, index=_default_index, item=_default_item, fork=_default_fork, total=_default_total):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['kind'] = kind
        __d['file'] = file
        __d['child_run_id'] = child_run_id
        __d['dir'] = dir
        __d['attempt'] = attempt
        __d['with_'] = _factory_with_() if with_ is _FACTORY else with_
        __d['resumed'] = resumed
        __d['branch'] = branch
        __d['index'] = index
        __d['item'] = item
        __d['fork'] = fork
        __d['total'] = total
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, kind=_default_kind, file=_default_file, child_run_id=_default_child_run_id, dir=_default_dir, attempt=_default_attempt, with_=_FACTORY, resumed=_default_resumed, branch=_default_branch, index=_default_index, item=_default_item, fork=_default_fork, total=_default_total):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['kind'] = kind\n    __d['file'] = file\n    __d['child_run_id'] = child_run_id\n    __d['dir'] = dir\n    __d['attempt'] = attempt\n    __d['with_'] = _factory_with_() if with_ is _FACTORY else with_\n    __d['resumed'] = resumed\n    __d['branch'] = branch\n    __d['index'] = index\n    __d['item'] = item\n    __d['fork'] = fork\n    __d['total'] = total\n"] = _11


def _12():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, loop=_default_loop, file=_default_file, max_iterations=_default_max_iterations, resumed=_default_resumed):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['loop'] = loop
        __d['file'] = file
        __d['max_iterations'] = max_iterations
        __d['resumed'] = resumed
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, loop=_default_loop, file=_default_file, max_iterations=_default_max_iterations, resumed=_default_resumed):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['loop'] = loop\n    __d['file'] = file\n    __d['max_iterations'] = max_iterations\n    __d['resumed'] = resumed\n"] = _12


def _13():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, model=_default_model, provider=_default_provider, temperature=_default_temperature, max_tokens=_default_max_tokens, system=_default_system, user=_default_user, schema=_FACTORY, examples=_default_examples, est_input_tokens=_default_est_input_tokens, cached=_default_cached):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['model'] = model
        __d['provider'] = provider
        __d['temperature'] = temperature
        __d['max_tokens'] = max_tokens
        __d['system'] = system
        __d['user'] = user
        __d['schema'] = _factory_schema() if schema is _FACTORY else schema
        __d['examples'] = examples
        __d['est_input_tokens'] = est_input_tokens
        __d['cached'] = cached
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, model=_default_model, provider=_default_provider, temperature=_default_temperature, max_tokens=_default_max_tokens, system=_default_system, user=_default_user, schema=_FACTORY, examples=_default_examples, est_input_tokens=_default_est_input_tokens, cached=_default_cached):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['model'] = model\n    __d['provider'] = provider\n    __d['temperature'] = temperature\n    __d['max_tokens'] = max_tokens\n    __d['system'] = system\n    __d['user'] = user\n    __d['schema'] = _factory_schema() if schema is _FACTORY else schema\n    __d['examples'] = examples\n    __d['est_input_tokens'] = est_input_tokens\n    __d['cached'] = cached\n"] = _13


def _14():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, model=_default_model, samples=_default_samples):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['model'] = model
        __d['samples'] = samples
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, model=_default_model, samples=_default_samples):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['model'] = model\n    __d['samples'] = samples\n"] = _14


def _15():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, previous_run_id=_default_previous_run_id, previous_pid=_default_previous_pid):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['previous_run_id'] = previous_run_id
        __d['previous_pid'] = previous_pid
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, previous_run_id=_default_previous_run_id, previous_pid=_default_previous_pid):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['previous_run_id'] = previous_run_id\n    __d['previous_pid'] = previous_pid\n"] = _15


def _16():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, question_id=_default_question_id, answer=_default_answer, note=_default_note, by=_default_by, via=_default_via):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['question_id'] = question_id
        __d['answer'] = answer
        __d['note'] = note
        __d['by'] = by
        __d['via'] = via
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, question_id=_default_question_id, answer=_default_answer, note=_default_note, by=_default_by, via=_default_via):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['question_id'] = question_id\n    __d['answer'] = answer\n    __d['note'] = note\n    __d['by'] = by\n    __d['via'] = via\n"] = _16


def _17():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, question_id=_default_question_id, prompt=_default_prompt, choices=_default_choices, asked_at=_default_asked_at, expires_at=_default_expires_at):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['question_id'] = question_id
        __d['prompt'] = prompt
        __d['choices'] = choices
        __d['asked_at'] = asked_at
        __d['expires_at'] = expires_at
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, question_id=_default_question_id, prompt=_default_prompt, choices=_default_choices, asked_at=_default_asked_at, expires_at=_default_expires_at):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['question_id'] = question_id\n    __d['prompt'] = prompt\n    __d['choices'] = choices\n    __d['asked_at'] = asked_at\n    __d['expires_at'] = expires_at\n"] = _17


def _18():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, reason=_default_reason, pending=_default_pending, exit_code=_default_exit_code, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['reason'] = reason
        __d['pending'] = pending
        __d['exit_code'] = exit_code
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['cost_usd'] = cost_usd
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, reason=_default_reason, pending=_default_pending, exit_code=_default_exit_code, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['reason'] = reason\n    __d['pending'] = pending\n    __d['exit_code'] = exit_code\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['cost_usd'] = cost_usd\n"] = _18


def _19():
    def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, type=_default_type, verdict=_default_verdict, details=_default_details, reason=_default_reason, tail=_default_tail):
        __d = self.__dict__
        __d['ts'] = ts
        __d['run_id'] = run_id
        __d['step'] = step
        __d['state'] = state
        __d['extra'] = _factory_extra() if extra is _FACTORY else extra
        __d['type'] = type
        __d['verdict'] = verdict
        __d['details'] = details
        __d['reason'] = reason
        __d['tail'] = tail
    return __init__

INITS["def __init__(self, *, ts=_default_ts, run_id=_default_run_id, step=_default_step, state=_default_state, extra=_FACTORY, type=_default_type, verdict=_default_verdict, details=_default_details, reason=_default_reason, tail=_default_tail):\n    __d = self.__dict__\n    __d['ts'] = ts\n    __d['run_id'] = run_id\n    __d['step'] = step\n    __d['state'] = state\n    __d['extra'] = _factory_extra() if extra is _FACTORY else extra\n    __d['type'] = type\n    __d['verdict'] = verdict\n    __d['details'] = details\n    __d['reason'] = reason\n    __d['tail'] = tail\n"] = _19


def _20():
    def __init__(self, attr, wire, optional, fits, details=_default_details):
        __d = self.__dict__
        __d['attr'] = attr
        __d['wire'] = wire
        __d['optional'] = optional
        __d['fits'] = fits
        __d['details'] = details
    return __init__

INITS["def __init__(self, attr, wire, optional, fits, details=_default_details):\n    __d = self.__dict__\n    __d['attr'] = attr\n    __d['wire'] = wire\n    __d['optional'] = optional\n    __d['fits'] = fits\n    __d['details'] = details\n"] = _20


def _21():
    def __init__(self, base_dir=_FACTORY, overrides=_FACTORY, max_iterations=_default_max_iterations, claude=_default_claude, claude_flags=_default_claude_flags, model=_default_model, cache=_default_cache, record=_default_record, replay=_default_replay, env=_default_env, fsync=_default_fsync, allow_concurrent=_default_allow_concurrent, on_output=_default_on_output, on_terminal_output=_default_on_terminal_output, answers=_FACTORY, prompt=_default_prompt, jobs=_default_jobs, branch=_default_branch, program_context=_default_program_context):
        __d = self.__dict__
        __d['base_dir'] = _factory_base_dir() if base_dir is _FACTORY else base_dir
        __d['overrides'] = _factory_overrides() if overrides is _FACTORY else overrides
        __d['max_iterations'] = max_iterations
        __d['claude'] = claude
        __d['claude_flags'] = claude_flags
        __d['model'] = model
        __d['cache'] = cache
        __d['record'] = record
        __d['replay'] = replay
        __d['env'] = env
        __d['fsync'] = fsync
        __d['allow_concurrent'] = allow_concurrent
        __d['on_output'] = on_output
        __d['on_terminal_output'] = on_terminal_output
        __d['answers'] = _factory_answers() if answers is _FACTORY else answers
        __d['prompt'] = prompt
        __d['jobs'] = jobs
        __d['branch'] = branch
        __d['program_context'] = program_context
    return __init__

INITS["def __init__(self, base_dir=_FACTORY, overrides=_FACTORY, max_iterations=_default_max_iterations, claude=_default_claude, claude_flags=_default_claude_flags, model=_default_model, cache=_default_cache, record=_default_record, replay=_default_replay, env=_default_env, fsync=_default_fsync, allow_concurrent=_default_allow_concurrent, on_output=_default_on_output, on_terminal_output=_default_on_terminal_output, answers=_FACTORY, prompt=_default_prompt, jobs=_default_jobs, branch=_default_branch, program_context=_default_program_context):\n    __d = self.__dict__\n    __d['base_dir'] = _factory_base_dir() if base_dir is _FACTORY else base_dir\n    __d['overrides'] = _factory_overrides() if overrides is _FACTORY else overrides\n    __d['max_iterations'] = max_iterations\n    __d['claude'] = claude\n    __d['claude_flags'] = claude_flags\n    __d['model'] = model\n    __d['cache'] = cache\n    __d['record'] = record\n    __d['replay'] = replay\n    __d['env'] = env\n    __d['fsync'] = fsync\n    __d['allow_concurrent'] = allow_concurrent\n    __d['on_output'] = on_output\n    __d['on_terminal_output'] = on_terminal_output\n    __d['answers'] = _factory_answers() if answers is _FACTORY else answers\n    __d['prompt'] = prompt\n    __d['jobs'] = jobs\n    __d['branch'] = branch\n    __d['program_context'] = program_context\n"] = _21


def _22():
    def __init__(self, cwd=_default_cwd, base_dir=_default_base_dir, overrides=_FACTORY, model=_default_model, cache=_default_cache, record=_default_record, replay=_default_replay, claude=_default_claude, claude_flags=_default_claude_flags, secret_sets=_default_secret_sets, secret_nonce=_default_secret_nonce):
        __d = self.__dict__
        __d['cwd'] = cwd
        __d['base_dir'] = base_dir
        __d['overrides'] = _factory_overrides() if overrides is _FACTORY else overrides
        __d['model'] = model
        __d['cache'] = cache
        __d['record'] = record
        __d['replay'] = replay
        __d['claude'] = claude
        __d['claude_flags'] = claude_flags
        __d['secret_sets'] = secret_sets
        __d['secret_nonce'] = secret_nonce
    return __init__

INITS["def __init__(self, cwd=_default_cwd, base_dir=_default_base_dir, overrides=_FACTORY, model=_default_model, cache=_default_cache, record=_default_record, replay=_default_replay, claude=_default_claude, claude_flags=_default_claude_flags, secret_sets=_default_secret_sets, secret_nonce=_default_secret_nonce):\n    __d = self.__dict__\n    __d['cwd'] = cwd\n    __d['base_dir'] = base_dir\n    __d['overrides'] = _factory_overrides() if overrides is _FACTORY else overrides\n    __d['model'] = model\n    __d['cache'] = cache\n    __d['record'] = record\n    __d['replay'] = replay\n    __d['claude'] = claude\n    __d['claude_flags'] = claude_flags\n    __d['secret_sets'] = secret_sets\n    __d['secret_nonce'] = secret_nonce\n"] = _22


def _23():
    def __init__(self, delimiter, strip_tabs, quoted):
        self.delimiter = delimiter
        self.strip_tabs = strip_tabs
        self.quoted = quoted
    return __init__

INITS['def __init__(self, delimiter, strip_tabs, quoted):\n    self.delimiter = delimiter\n    self.strip_tabs = strip_tabs\n    self.quoted = quoted\n'] = _23


def _24():
    def __init__(self, file, sets=_default_sets, max_iterations=_default_max_iterations, dry_run=_default_dry_run, json_mode=_default_json_mode, quiet=_default_quiet, verbose=_default_verbose, junit_xml=_default_junit_xml, report=_default_report, heartbeat=_default_heartbeat, otel=_default_otel, claude=_default_claude, claude_flags=_default_claude_flags, model=_default_model, no_cache=_default_no_cache, record=_default_record, replay=_default_replay, fsync=_default_fsync, allow_concurrent=_default_allow_concurrent, background=_default_background, simulate=_default_simulate, answers=_default_answers, no_input=_default_no_input, jobs=_default_jobs, branch=_default_branch, run_id=_default_run_id):
        __d = self.__dict__
        __d['file'] = file
        __d['sets'] = sets
        __d['max_iterations'] = max_iterations
        __d['dry_run'] = dry_run
        __d['json_mode'] = json_mode
        __d['quiet'] = quiet
        __d['verbose'] = verbose
        __d['junit_xml'] = junit_xml
        __d['report'] = report
        __d['heartbeat'] = heartbeat
        __d['otel'] = otel
        __d['claude'] = claude
        __d['claude_flags'] = claude_flags
        __d['model'] = model
        __d['no_cache'] = no_cache
        __d['record'] = record
        __d['replay'] = replay
        __d['fsync'] = fsync
        __d['allow_concurrent'] = allow_concurrent
        __d['background'] = background
        __d['simulate'] = simulate
        __d['answers'] = answers
        __d['no_input'] = no_input
        __d['jobs'] = jobs
        __d['branch'] = branch
        __d['run_id'] = run_id
    return __init__

INITS["def __init__(self, file, sets=_default_sets, max_iterations=_default_max_iterations, dry_run=_default_dry_run, json_mode=_default_json_mode, quiet=_default_quiet, verbose=_default_verbose, junit_xml=_default_junit_xml, report=_default_report, heartbeat=_default_heartbeat, otel=_default_otel, claude=_default_claude, claude_flags=_default_claude_flags, model=_default_model, no_cache=_default_no_cache, record=_default_record, replay=_default_replay, fsync=_default_fsync, allow_concurrent=_default_allow_concurrent, background=_default_background, simulate=_default_simulate, answers=_default_answers, no_input=_default_no_input, jobs=_default_jobs, branch=_default_branch, run_id=_default_run_id):\n    __d = self.__dict__\n    __d['file'] = file\n    __d['sets'] = sets\n    __d['max_iterations'] = max_iterations\n    __d['dry_run'] = dry_run\n    __d['json_mode'] = json_mode\n    __d['quiet'] = quiet\n    __d['verbose'] = verbose\n    __d['junit_xml'] = junit_xml\n    __d['report'] = report\n    __d['heartbeat'] = heartbeat\n    __d['otel'] = otel\n    __d['claude'] = claude\n    __d['claude_flags'] = claude_flags\n    __d['model'] = model\n    __d['no_cache'] = no_cache\n    __d['record'] = record\n    __d['replay'] = replay\n    __d['fsync'] = fsync\n    __d['allow_concurrent'] = allow_concurrent\n    __d['background'] = background\n    __d['simulate'] = simulate\n    __d['answers'] = answers\n    __d['no_input'] = no_input\n    __d['jobs'] = jobs\n    __d['branch'] = branch\n    __d['run_id'] = run_id\n"] = _24


def _25():
    def __init__(self, final_state, outcome, exit_code, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd, outputs=_FACTORY, error=_default_error, via_terminal=_default_via_terminal):
        __d = self.__dict__
        __d['final_state'] = final_state
        __d['outcome'] = outcome
        __d['exit_code'] = exit_code
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['cost_usd'] = cost_usd
        __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs
        __d['error'] = error
        __d['via_terminal'] = via_terminal
    return __init__

INITS["def __init__(self, final_state, outcome, exit_code, steps=_default_steps, duration_ms=_default_duration_ms, cost_usd=_default_cost_usd, outputs=_FACTORY, error=_default_error, via_terminal=_default_via_terminal):\n    __d = self.__dict__\n    __d['final_state'] = final_state\n    __d['outcome'] = outcome\n    __d['exit_code'] = exit_code\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['cost_usd'] = cost_usd\n    __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs\n    __d['error'] = error\n    __d['via_terminal'] = via_terminal\n"] = _25


def _26():
    def __init__(self, from_, to, verdict, via):
        __d = self.__dict__
        __d['from_'] = from_
        __d['to'] = to
        __d['verdict'] = verdict
        __d['via'] = via
    return __init__

INITS["def __init__(self, from_, to, verdict, via):\n    __d = self.__dict__\n    __d['from_'] = from_\n    __d['to'] = to\n    __d['verdict'] = verdict\n    __d['via'] = via\n"] = _26


def _27():
    def __init__(self, id, answer, note=_default_note, by=_default_by, via=_default_via, at=_default_at, asked_at=_default_asked_at):
        __d = self.__dict__
        __d['id'] = id
        __d['answer'] = answer
        __d['note'] = note
        __d['by'] = by
        __d['via'] = via
        __d['at'] = at
        __d['asked_at'] = asked_at
    return __init__

INITS["def __init__(self, id, answer, note=_default_note, by=_default_by, via=_default_via, at=_default_at, asked_at=_default_asked_at):\n    __d = self.__dict__\n    __d['id'] = id\n    __d['answer'] = answer\n    __d['note'] = note\n    __d['by'] = by\n    __d['via'] = via\n    __d['at'] = at\n    __d['asked_at'] = asked_at\n"] = _27


def _28():
    def __init__(self, id, state, step, prompt, choices, asked_at, expires_at=_default_expires_at):
        __d = self.__dict__
        __d['id'] = id
        __d['state'] = state
        __d['step'] = step
        __d['prompt'] = prompt
        __d['choices'] = choices
        __d['asked_at'] = asked_at
        __d['expires_at'] = expires_at
    return __init__

INITS["def __init__(self, id, state, step, prompt, choices, asked_at, expires_at=_default_expires_at):\n    __d = self.__dict__\n    __d['id'] = id\n    __d['state'] = state\n    __d['step'] = step\n    __d['prompt'] = prompt\n    __d['choices'] = choices\n    __d['asked_at'] = asked_at\n    __d['expires_at'] = expires_at\n"] = _28


def _29():
    def __init__(self, item, root, child, scope, action, result=_default_result, error=_default_error):
        self.item = item
        self.root = root
        self.child = child
        self.scope = scope
        self.action = action
        self.result = result
        self.error = error
    return __init__

INITS['def __init__(self, item, root, child, scope, action, result=_default_result, error=_default_error):\n    self.item = item\n    self.root = root\n    self.child = child\n    self.scope = scope\n    self.action = action\n    self.result = result\n    self.error = error\n'] = _29


def _30():
    def __init__(self, json_mode, quiet, verbose, junit_xml, heartbeat, otel=_default_otel, no_input=_default_no_input, report=_default_report):
        __d = self.__dict__
        __d['json_mode'] = json_mode
        __d['quiet'] = quiet
        __d['verbose'] = verbose
        __d['junit_xml'] = junit_xml
        __d['heartbeat'] = heartbeat
        __d['otel'] = otel
        __d['no_input'] = no_input
        __d['report'] = report
    return __init__

INITS["def __init__(self, json_mode, quiet, verbose, junit_xml, heartbeat, otel=_default_otel, no_input=_default_no_input, report=_default_report):\n    __d = self.__dict__\n    __d['json_mode'] = json_mode\n    __d['quiet'] = quiet\n    __d['verbose'] = verbose\n    __d['junit_xml'] = junit_xml\n    __d['heartbeat'] = heartbeat\n    __d['otel'] = otel\n    __d['no_input'] = no_input\n    __d['report'] = report\n"] = _30


def _31():
    def __init__(self, key, index, item, fork, total, wrap):
        __d = self.__dict__
        __d['key'] = key
        __d['index'] = index
        __d['item'] = item
        __d['fork'] = fork
        __d['total'] = total
        __d['wrap'] = wrap
    return __init__

INITS["def __init__(self, key, index, item, fork, total, wrap):\n    __d = self.__dict__\n    __d['key'] = key\n    __d['index'] = index\n    __d['item'] = item\n    __d['fork'] = fork\n    __d['total'] = total\n    __d['wrap'] = wrap\n"] = _31


def _32():
    def __init__(self, key, index, value):
        __d = self.__dict__
        __d['key'] = key
        __d['index'] = index
        __d['value'] = value
    return __init__

INITS["def __init__(self, key, index, value):\n    __d = self.__dict__\n    __d['key'] = key\n    __d['index'] = index\n    __d['value'] = value\n"] = _32


def _33():
    def __init__(self, kind, text, cwd, shell=_default_shell, claude=_default_claude, flags=_default_flags, env=_default_env, timeout=_default_timeout, log_path=_default_log_path, tail_bytes=_default_tail_bytes, on_output=_default_on_output, on_start=_default_on_start, interruptible=_default_interruptible):
        __d = self.__dict__
        __d['kind'] = kind
        __d['text'] = text
        __d['cwd'] = cwd
        __d['shell'] = shell
        __d['claude'] = claude
        __d['flags'] = flags
        __d['env'] = env
        __d['timeout'] = timeout
        __d['log_path'] = log_path
        __d['tail_bytes'] = tail_bytes
        __d['on_output'] = on_output
        __d['on_start'] = on_start
        __d['interruptible'] = interruptible
    return __init__

INITS["def __init__(self, kind, text, cwd, shell=_default_shell, claude=_default_claude, flags=_default_flags, env=_default_env, timeout=_default_timeout, log_path=_default_log_path, tail_bytes=_default_tail_bytes, on_output=_default_on_output, on_start=_default_on_start, interruptible=_default_interruptible):\n    __d = self.__dict__\n    __d['kind'] = kind\n    __d['text'] = text\n    __d['cwd'] = cwd\n    __d['shell'] = shell\n    __d['claude'] = claude\n    __d['flags'] = flags\n    __d['env'] = env\n    __d['timeout'] = timeout\n    __d['log_path'] = log_path\n    __d['tail_bytes'] = tail_bytes\n    __d['on_output'] = on_output\n    __d['on_start'] = on_start\n    __d['interruptible'] = interruptible\n"] = _33


def _34():
    def __init__(self, line=_default_line, col=_default_col):
        __d = self.__dict__
        __d['line'] = line
        __d['col'] = col
    return __init__

INITS["def __init__(self, line=_default_line, col=_default_col):\n    __d = self.__dict__\n    __d['line'] = line\n    __d['col'] = col\n"] = _34


def _35():
    def __init__(self, loop, file, locate):
        __d = self.__dict__
        __d['loop'] = loop
        __d['file'] = file
        __d['locate'] = locate
    return __init__

INITS["def __init__(self, loop, file, locate):\n    __d = self.__dict__\n    __d['loop'] = loop\n    __d['file'] = file\n    __d['locate'] = locate\n"] = _35


def _36():
    def __init__(self, loop, options, progress, session, steps, parent, redactor, listeners, env, new_run, _epoch=_default__epoch, resolved=_FACTORY):
        self.loop = loop
        self.options = options
        self.progress = progress
        self.session = session
        self.steps = steps
        self.parent = parent
        self.redactor = redactor
        self.listeners = listeners
        self.env = env
        self.new_run = new_run
        self._epoch = _epoch
        self.resolved = _factory_resolved() if resolved is _FACTORY else resolved
    return __init__

INITS['def __init__(self, loop, options, progress, session, steps, parent, redactor, listeners, env, new_run, _epoch=_default__epoch, resolved=_FACTORY):\n    self.loop = loop\n    self.options = options\n    self.progress = progress\n    self.session = session\n    self.steps = steps\n    self.parent = parent\n    self.redactor = redactor\n    self.listeners = listeners\n    self.env = env\n    self.new_run = new_run\n    self._epoch = _epoch\n    self.resolved = _factory_resolved() if resolved is _FACTORY else resolved\n'] = _36


def _37():
    def __init__(self, max_attempts=_default_max_attempts, interval=_default_interval, backoff_rate=_default_backoff_rate, max_delay=_default_max_delay, jitter=_default_jitter, on=_default_on):
        __d = self.__dict__
        __d['max_attempts'] = max_attempts
        __d['interval'] = interval
        __d['backoff_rate'] = backoff_rate
        __d['max_delay'] = max_delay
        __d['jitter'] = jitter
        __d['on'] = on
    return __init__

INITS["def __init__(self, max_attempts=_default_max_attempts, interval=_default_interval, backoff_rate=_default_backoff_rate, max_delay=_default_max_delay, jitter=_default_jitter, on=_default_on):\n    __d = self.__dict__\n    __d['max_attempts'] = max_attempts\n    __d['interval'] = interval\n    __d['backoff_rate'] = backoff_rate\n    __d['max_delay'] = max_delay\n    __d['jitter'] = jitter\n    __d['on'] = on\n"] = _37


def _38():
    def __init__(self, model=_default_model, max_tokens=_default_max_tokens, timeout=_default_timeout, min_confidence=_default_min_confidence, max_output_chars=_default_max_output_chars):
        __d = self.__dict__
        __d['model'] = model
        __d['max_tokens'] = max_tokens
        __d['timeout'] = timeout
        __d['min_confidence'] = min_confidence
        __d['max_output_chars'] = max_output_chars
    return __init__

INITS["def __init__(self, model=_default_model, max_tokens=_default_max_tokens, timeout=_default_timeout, min_confidence=_default_min_confidence, max_output_chars=_default_max_output_chars):\n    __d = self.__dict__\n    __d['model'] = model\n    __d['max_tokens'] = max_tokens\n    __d['timeout'] = timeout\n    __d['min_confidence'] = min_confidence\n    __d['max_output_chars'] = max_output_chars\n"] = _38


def _39():
    def __init__(self, monotonic=_default_monotonic, wall=_default_wall, sleep=_default_sleep):
        __d = self.__dict__
        __d['monotonic'] = monotonic
        __d['wall'] = wall
        __d['sleep'] = sleep
    return __init__

INITS["def __init__(self, monotonic=_default_monotonic, wall=_default_wall, sleep=_default_sleep):\n    __d = self.__dict__\n    __d['monotonic'] = monotonic\n    __d['wall'] = wall\n    __d['sleep'] = sleep\n"] = _39


def _40():
    def __init__(self, name, initial, states, path=_default_path, description=_default_description, context=_FACTORY, max_iterations=_default_max_iterations, on_max_iterations=_default_on_max_iterations, timeout=_default_timeout, action_timeout=_default_action_timeout, backoff=_default_backoff, maintain=_default_maintain, on_error=_default_on_error, llm=_default_llm, judges=_FACTORY, max_cost_usd=_default_max_cost_usd, keep_runs=_default_keep_runs, secrets=_default_secrets, shell=_default_shell, working_dir=_default_working_dir, source_sha256=_default_source_sha256, outputs=_FACTORY, inputs=_FACTORY):
        __d = self.__dict__
        __d['name'] = name
        __d['initial'] = initial
        __d['states'] = states
        __d['path'] = path
        __d['description'] = description
        __d['context'] = _factory_context() if context is _FACTORY else context
        __d['max_iterations'] = max_iterations
        __d['on_max_iterations'] = on_max_iterations
        __d['timeout'] = timeout
        __d['action_timeout'] = action_timeout
        __d['backoff'] = backoff
        __d['maintain'] = maintain
        __d['on_error'] = on_error
        __d['llm'] = llm
        __d['judges'] = _factory_judges() if judges is _FACTORY else judges
        __d['max_cost_usd'] = max_cost_usd
        __d['keep_runs'] = keep_runs
        __d['secrets'] = secrets
        __d['shell'] = shell
        __d['working_dir'] = working_dir
        __d['source_sha256'] = source_sha256
        __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs
        __d['inputs'] = _factory_inputs() if inputs is _FACTORY else inputs
    return __init__

INITS["def __init__(self, name, initial, states, path=_default_path, description=_default_description, context=_FACTORY, max_iterations=_default_max_iterations, on_max_iterations=_default_on_max_iterations, timeout=_default_timeout, action_timeout=_default_action_timeout, backoff=_default_backoff, maintain=_default_maintain, on_error=_default_on_error, llm=_default_llm, judges=_FACTORY, max_cost_usd=_default_max_cost_usd, keep_runs=_default_keep_runs, secrets=_default_secrets, shell=_default_shell, working_dir=_default_working_dir, source_sha256=_default_source_sha256, outputs=_FACTORY, inputs=_FACTORY):\n    __d = self.__dict__\n    __d['name'] = name\n    __d['initial'] = initial\n    __d['states'] = states\n    __d['path'] = path\n    __d['description'] = description\n    __d['context'] = _factory_context() if context is _FACTORY else context\n    __d['max_iterations'] = max_iterations\n    __d['on_max_iterations'] = on_max_iterations\n    __d['timeout'] = timeout\n    __d['action_timeout'] = action_timeout\n    __d['backoff'] = backoff\n    __d['maintain'] = maintain\n    __d['on_error'] = on_error\n    __d['llm'] = llm\n    __d['judges'] = _factory_judges() if judges is _FACTORY else judges\n    __d['max_cost_usd'] = max_cost_usd\n    __d['keep_runs'] = keep_runs\n    __d['secrets'] = secrets\n    __d['shell'] = shell\n    __d['working_dir'] = working_dir\n    __d['source_sha256'] = source_sha256\n    __d['outputs'] = _factory_outputs() if outputs is _FACTORY else outputs\n    __d['inputs'] = _factory_inputs() if inputs is _FACTORY else inputs\n"] = _40


def _41():
    def __init__(self, name, pos=_default_pos, action=_default_action, action_type=_default_action_type, evaluate=_default_evaluate, routes=_FACTORY, next=_default_next, terminal=_default_terminal, outcome=_default_outcome, capture=_default_capture, timeout=_default_timeout, retry=_default_retry, on_maintain=_default_on_maintain, description=_default_description, loop=_default_loop, with_=_FACTORY, ask=_default_ask, choices=_default_choices, parallel=_FACTORY, for_each=_default_for_each, join=_default_join, max_concurrency=_default_max_concurrency, fail_fast=_default_fail_fast):
        __d = self.__dict__
        __d['name'] = name
        __d['pos'] = pos
        __d['action'] = action
        __d['action_type'] = action_type
        __d['evaluate'] = evaluate
        __d['routes'] = _factory_routes() if routes is _FACTORY else routes
        __d['next'] = next
        __d['terminal'] = terminal
        __d['outcome'] = outcome
        __d['capture'] = capture
        __d['timeout'] = timeout
        __d['retry'] = retry
        __d['on_maintain'] = on_maintain
        __d['description'] = description
        __d['loop'] = loop
        __d['with_'] = _factory_with_() if with_ is _FACTORY else with_
        __d['ask'] = ask
        __d['choices'] = choices
        __d['parallel'] = _factory_parallel() if parallel is _FACTORY else parallel
        __d['for_each'] = for_each
        __d['join'] = join
        __d['max_concurrency'] = max_concurrency
        __d['fail_fast'] = fail_fast
    return __init__

INITS["def __init__(self, name, pos=_default_pos, action=_default_action, action_type=_default_action_type, evaluate=_default_evaluate, routes=_FACTORY, next=_default_next, terminal=_default_terminal, outcome=_default_outcome, capture=_default_capture, timeout=_default_timeout, retry=_default_retry, on_maintain=_default_on_maintain, description=_default_description, loop=_default_loop, with_=_FACTORY, ask=_default_ask, choices=_default_choices, parallel=_FACTORY, for_each=_default_for_each, join=_default_join, max_concurrency=_default_max_concurrency, fail_fast=_default_fail_fast):\n    __d = self.__dict__\n    __d['name'] = name\n    __d['pos'] = pos\n    __d['action'] = action\n    __d['action_type'] = action_type\n    __d['evaluate'] = evaluate\n    __d['routes'] = _factory_routes() if routes is _FACTORY else routes\n    __d['next'] = next\n    __d['terminal'] = terminal\n    __d['outcome'] = outcome\n    __d['capture'] = capture\n    __d['timeout'] = timeout\n    __d['retry'] = retry\n    __d['on_maintain'] = on_maintain\n    __d['description'] = description\n    __d['loop'] = loop\n    __d['with_'] = _factory_with_() if with_ is _FACTORY else with_\n    __d['ask'] = ask\n    __d['choices'] = choices\n    __d['parallel'] = _factory_parallel() if parallel is _FACTORY else parallel\n    __d['for_each'] = for_each\n    __d['join'] = join\n    __d['max_concurrency'] = max_concurrency\n    __d['fail_fast'] = fail_fast\n"] = _41


def _42():
    def __init__(self, need=_default_need, verdict=_default_verdict):
        __d = self.__dict__
        __d['need'] = need
        __d['verdict'] = verdict
    return __init__

INITS["def __init__(self, need=_default_need, verdict=_default_verdict):\n    __d = self.__dict__\n    __d['need'] = need\n    __d['verdict'] = verdict\n"] = _42


def _43():
    def __init__(self, of):
        __d = self.__dict__
        __d['of'] = of
    return __init__

INITS["def __init__(self, of):\n    __d = self.__dict__\n    __d['of'] = of\n"] = _43


def _44():
    def __init__(self, operator, target, source):
        __d = self.__dict__
        __d['operator'] = operator
        __d['target'] = target
        __d['source'] = source
    return __init__

INITS["def __init__(self, operator, target, source):\n    __d = self.__dict__\n    __d['operator'] = operator\n    __d['target'] = target\n    __d['source'] = source\n"] = _44


def _45():
    def __init__(self, output, stderr, exit_code, duration_ms, timed_out, output_bytes, error=_default_error, cost_usd=_default_cost_usd, details=_default_details, output_at=_default_output_at):
        __d = self.__dict__
        __d['output'] = output
        __d['stderr'] = stderr
        __d['exit_code'] = exit_code
        __d['duration_ms'] = duration_ms
        __d['timed_out'] = timed_out
        __d['output_bytes'] = output_bytes
        __d['error'] = error
        __d['cost_usd'] = cost_usd
        __d['details'] = details
        __d['output_at'] = output_at
    return __init__

INITS["def __init__(self, output, stderr, exit_code, duration_ms, timed_out, output_bytes, error=_default_error, cost_usd=_default_cost_usd, details=_default_details, output_at=_default_output_at):\n    __d = self.__dict__\n    __d['output'] = output\n    __d['stderr'] = stderr\n    __d['exit_code'] = exit_code\n    __d['duration_ms'] = duration_ms\n    __d['timed_out'] = timed_out\n    __d['output_bytes'] = output_bytes\n    __d['error'] = error\n    __d['cost_usd'] = cost_usd\n    __d['details'] = details\n    __d['output_at'] = output_at\n"] = _45


def _46():
    def __init__(self, output, verdict, reason=_default_reason):
        __d = self.__dict__
        __d['output'] = output
        __d['verdict'] = verdict
        __d['reason'] = reason
    return __init__

INITS["def __init__(self, output, verdict, reason=_default_reason):\n    __d = self.__dict__\n    __d['output'] = output\n    __d['verdict'] = verdict\n    __d['reason'] = reason\n"] = _46


def _47():
    def __init__(self, output=_default_output, stderr=_default_stderr, exit_code=_default_exit_code, duration_ms=_default_duration_ms, state=_default_state, outputs=_default_outputs, final_state=_default_final_state, outcome=_default_outcome, run_id=_default_run_id, steps=_default_steps, cost_usd=_default_cost_usd, error=_default_error, verdict=_default_verdict, key=_default_key, index=_default_index, item=_default_item, keys=_default_keys):
        __d = self.__dict__
        __d['output'] = output
        __d['stderr'] = stderr
        __d['exit_code'] = exit_code
        __d['duration_ms'] = duration_ms
        __d['state'] = state
        __d['outputs'] = outputs
        __d['final_state'] = final_state
        __d['outcome'] = outcome
        __d['run_id'] = run_id
        __d['steps'] = steps
        __d['cost_usd'] = cost_usd
        __d['error'] = error
        __d['verdict'] = verdict
        __d['key'] = key
        __d['index'] = index
        __d['item'] = item
        __d['keys'] = keys
    return __init__

INITS["def __init__(self, output=_default_output, stderr=_default_stderr, exit_code=_default_exit_code, duration_ms=_default_duration_ms, state=_default_state, outputs=_default_outputs, final_state=_default_final_state, outcome=_default_outcome, run_id=_default_run_id, steps=_default_steps, cost_usd=_default_cost_usd, error=_default_error, verdict=_default_verdict, key=_default_key, index=_default_index, item=_default_item, keys=_default_keys):\n    __d = self.__dict__\n    __d['output'] = output\n    __d['stderr'] = stderr\n    __d['exit_code'] = exit_code\n    __d['duration_ms'] = duration_ms\n    __d['state'] = state\n    __d['outputs'] = outputs\n    __d['final_state'] = final_state\n    __d['outcome'] = outcome\n    __d['run_id'] = run_id\n    __d['steps'] = steps\n    __d['cost_usd'] = cost_usd\n    __d['error'] = error\n    __d['verdict'] = verdict\n    __d['key'] = key\n    __d['index'] = index\n    __d['item'] = item\n    __d['keys'] = keys\n"] = _47


def _48():
    def __init__(self, parts, error, last_quoted, context_keys=_default_context_keys):
        __d = self.__dict__
        __d['parts'] = parts
        __d['error'] = error
        __d['last_quoted'] = last_quoted
        __d['context_keys'] = context_keys
    return __init__

INITS["def __init__(self, parts, error, last_quoted, context_keys=_default_context_keys):\n    __d = self.__dict__\n    __d['parts'] = parts\n    __d['error'] = error\n    __d['last_quoted'] = last_quoted\n    __d['context_keys'] = context_keys\n"] = _48


def _49():
    def __init__(self, path, code, message, key=_default_key):
        __d = self.__dict__
        __d['path'] = path
        __d['code'] = code
        __d['message'] = message
        __d['key'] = key
    return __init__

INITS["def __init__(self, path, code, message, key=_default_key):\n    __d = self.__dict__\n    __d['path'] = path\n    __d['code'] = code\n    __d['message'] = message\n    __d['key'] = key\n"] = _49


def _50():
    def __init__(self, path, operator, target, source):
        __d = self.__dict__
        __d['path'] = path
        __d['operator'] = operator
        __d['target'] = target
        __d['source'] = source
    return __init__

INITS["def __init__(self, path, operator, target, source):\n    __d = self.__dict__\n    __d['path'] = path\n    __d['operator'] = operator\n    __d['target'] = target\n    __d['source'] = source\n"] = _50


def _51():
    def __init__(self, path, secrets, listeners, budget_left=_default_budget_left, snapshot=_default_snapshot, env=_default_env, resolved=_FACTORY):
        __d = self.__dict__
        __d['path'] = path
        __d['secrets'] = secrets
        __d['listeners'] = listeners
        __d['budget_left'] = budget_left
        __d['snapshot'] = snapshot
        __d['env'] = env
        __d['resolved'] = _factory_resolved() if resolved is _FACTORY else resolved
    return __init__

INITS["def __init__(self, path, secrets, listeners, budget_left=_default_budget_left, snapshot=_default_snapshot, env=_default_env, resolved=_FACTORY):\n    __d = self.__dict__\n    __d['path'] = path\n    __d['secrets'] = secrets\n    __d['listeners'] = listeners\n    __d['budget_left'] = budget_left\n    __d['snapshot'] = snapshot\n    __d['env'] = env\n    __d['resolved'] = _factory_resolved() if resolved is _FACTORY else resolved\n"] = _51


def _52():
    def __init__(self, path, step, run, branch=_default_branch):
        __d = self.__dict__
        __d['path'] = path
        __d['step'] = step
        __d['run'] = run
        __d['branch'] = branch
    return __init__

INITS["def __init__(self, path, step, run, branch=_default_branch):\n    __d = self.__dict__\n    __d['path'] = path\n    __d['step'] = step\n    __d['run'] = run\n    __d['branch'] = branch\n"] = _52


def _53():
    def __init__(self, pattern, literal, negate, source):
        __d = self.__dict__
        __d['pattern'] = pattern
        __d['literal'] = literal
        __d['negate'] = negate
        __d['source'] = source
    return __init__

INITS["def __init__(self, pattern, literal, negate, source):\n    __d = self.__dict__\n    __d['pattern'] = pattern\n    __d['literal'] = literal\n    __d['negate'] = negate\n    __d['source'] = source\n"] = _53


def _54():
    def __init__(self, plan, loop, runner):
        self.plan = plan
        self.loop = loop
        self.runner = runner
    return __init__

INITS['def __init__(self, plan, loop, runner):\n    self.plan = plan\n    self.loop = loop\n    self.runner = runner\n'] = _54


def _55():
    def __init__(self, prompt, source, schema, min_confidence, uncertain_suffix, model, max_tokens, timeout, max_output_chars, fail_open, prior_reason, samples, judge, rubric_file, examples, temperature, models, reference):
        __d = self.__dict__
        __d['prompt'] = prompt
        __d['source'] = source
        __d['schema'] = schema
        __d['min_confidence'] = min_confidence
        __d['uncertain_suffix'] = uncertain_suffix
        __d['model'] = model
        __d['max_tokens'] = max_tokens
        __d['timeout'] = timeout
        __d['max_output_chars'] = max_output_chars
        __d['fail_open'] = fail_open
        __d['prior_reason'] = prior_reason
        __d['samples'] = samples
        __d['judge'] = judge
        __d['rubric_file'] = rubric_file
        __d['examples'] = examples
        __d['temperature'] = temperature
        __d['models'] = models
        __d['reference'] = reference
    return __init__

INITS["def __init__(self, prompt, source, schema, min_confidence, uncertain_suffix, model, max_tokens, timeout, max_output_chars, fail_open, prior_reason, samples, judge, rubric_file, examples, temperature, models, reference):\n    __d = self.__dict__\n    __d['prompt'] = prompt\n    __d['source'] = source\n    __d['schema'] = schema\n    __d['min_confidence'] = min_confidence\n    __d['uncertain_suffix'] = uncertain_suffix\n    __d['model'] = model\n    __d['max_tokens'] = max_tokens\n    __d['timeout'] = timeout\n    __d['max_output_chars'] = max_output_chars\n    __d['fail_open'] = fail_open\n    __d['prior_reason'] = prior_reason\n    __d['samples'] = samples\n    __d['judge'] = judge\n    __d['rubric_file'] = rubric_file\n    __d['examples'] = examples\n    __d['temperature'] = temperature\n    __d['models'] = models\n    __d['reference'] = reference\n"] = _55


def _56():
    def __init__(self, question_id, expires_at):
        __d = self.__dict__
        __d['question_id'] = question_id
        __d['expires_at'] = expires_at
    return __init__

INITS["def __init__(self, question_id, expires_at):\n    __d = self.__dict__\n    __d['question_id'] = question_id\n    __d['expires_at'] = expires_at\n"] = _56


def _57():
    def __init__(self, required=_default_required, default=_default_default, type=_default_type, enum=_default_enum, description=_default_description):
        __d = self.__dict__
        __d['required'] = required
        __d['default'] = default
        __d['type'] = type
        __d['enum'] = enum
        __d['description'] = description
    return __init__

INITS["def __init__(self, required=_default_required, default=_default_default, type=_default_type, enum=_default_enum, description=_default_description):\n    __d = self.__dict__\n    __d['required'] = required\n    __d['default'] = default\n    __d['type'] = type\n    __d['enum'] = enum\n    __d['description'] = description\n"] = _57


def _58():
    def __init__(self, run_id, final_state, outcome, exit_code, steps, duration_ms, cost_usd, outputs, error=_default_error, via_terminal=_default_via_terminal):
        __d = self.__dict__
        __d['run_id'] = run_id
        __d['final_state'] = final_state
        __d['outcome'] = outcome
        __d['exit_code'] = exit_code
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['cost_usd'] = cost_usd
        __d['outputs'] = outputs
        __d['error'] = error
        __d['via_terminal'] = via_terminal
    return __init__

INITS["def __init__(self, run_id, final_state, outcome, exit_code, steps, duration_ms, cost_usd, outputs, error=_default_error, via_terminal=_default_via_terminal):\n    __d = self.__dict__\n    __d['run_id'] = run_id\n    __d['final_state'] = final_state\n    __d['outcome'] = outcome\n    __d['exit_code'] = exit_code\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['cost_usd'] = cost_usd\n    __d['outputs'] = outputs\n    __d['error'] = error\n    __d['via_terminal'] = via_terminal\n"] = _58


def _59():
    def __init__(self, run_id, loop_file, loop_sha256, started_at, context, max_iterations, current, status=_default_status, step=_default_step, elapsed_ms=_default_elapsed_ms, cost_usd=_default_cost_usd, captured=_FACTORY, prev=_FACTORY, convergence=_FACTORY, prior_reasons=_FACTORY, path=_FACTORY, on_max_used=_default_on_max_used, attempt=_default_attempt, pid=_default_pid, pid_start=_default_pid_start, options=_FACTORY, last_route=_default_last_route, outcome=_default_outcome, exit_code=_default_exit_code, error=_default_error, final_state=_default_final_state, outputs=_default_outputs, pending=_FACTORY):
        self.run_id = run_id
        self.loop_file = loop_file
        self.loop_sha256 = loop_sha256
        self.started_at = started_at
        self.context = context
        self.max_iterations = max_iterations
        self.current = current
        self.status = status
        self.step = step
        self.elapsed_ms = elapsed_ms
        self.cost_usd = cost_usd
        self.captured = _factory_captured() if captured is _FACTORY else captured
        self.prev = _factory_prev() if prev is _FACTORY else prev
        self.convergence = _factory_convergence() if convergence is _FACTORY else convergence
        self.prior_reasons = _factory_prior_reasons() if prior_reasons is _FACTORY else prior_reasons
        self.path = _factory_path() if path is _FACTORY else path
        self.on_max_used = on_max_used
        self.attempt = attempt
        self.pid = pid
        self.pid_start = pid_start
        self.options = _factory_options() if options is _FACTORY else options
        self.last_route = last_route
        self.outcome = outcome
        self.exit_code = exit_code
        self.error = error
        self.final_state = final_state
        self.outputs = outputs
        self.pending = _factory_pending() if pending is _FACTORY else pending
    return __init__

INITS['def __init__(self, run_id, loop_file, loop_sha256, started_at, context, max_iterations, current, status=_default_status, step=_default_step, elapsed_ms=_default_elapsed_ms, cost_usd=_default_cost_usd, captured=_FACTORY, prev=_FACTORY, convergence=_FACTORY, prior_reasons=_FACTORY, path=_FACTORY, on_max_used=_default_on_max_used, attempt=_default_attempt, pid=_default_pid, pid_start=_default_pid_start, options=_FACTORY, last_route=_default_last_route, outcome=_default_outcome, exit_code=_default_exit_code, error=_default_error, final_state=_default_final_state, outputs=_default_outputs, pending=_FACTORY):\n    self.run_id = run_id\n    self.loop_file = loop_file\n    self.loop_sha256 = loop_sha256\n    self.started_at = started_at\n    self.context = context\n    self.max_iterations = max_iterations\n    self.current = current\n    self.status = status\n    self.step = step\n    self.elapsed_ms = elapsed_ms\n    self.cost_usd = cost_usd\n    self.captured = _factory_captured() if captured is _FACTORY else captured\n    self.prev = _factory_prev() if prev is _FACTORY else prev\n    self.convergence = _factory_convergence() if convergence is _FACTORY else convergence\n    self.prior_reasons = _factory_prior_reasons() if prior_reasons is _FACTORY else prior_reasons\n    self.path = _factory_path() if path is _FACTORY else path\n    self.on_max_used = on_max_used\n    self.attempt = attempt\n    self.pid = pid\n    self.pid_start = pid_start\n    self.options = _factory_options() if options is _FACTORY else options\n    self.last_route = last_route\n    self.outcome = outcome\n    self.exit_code = exit_code\n    self.error = error\n    self.final_state = final_state\n    self.outputs = outputs\n    self.pending = _factory_pending() if pending is _FACTORY else pending\n'] = _59


def _60():
    def __init__(self, run_id, outcome, exit_code, final_state, steps, duration_ms, path, run_dir, error=_default_error):
        __d = self.__dict__
        __d['run_id'] = run_id
        __d['outcome'] = outcome
        __d['exit_code'] = exit_code
        __d['final_state'] = final_state
        __d['steps'] = steps
        __d['duration_ms'] = duration_ms
        __d['path'] = path
        __d['run_dir'] = run_dir
        __d['error'] = error
    return __init__

INITS["def __init__(self, run_id, outcome, exit_code, final_state, steps, duration_ms, path, run_dir, error=_default_error):\n    __d = self.__dict__\n    __d['run_id'] = run_id\n    __d['outcome'] = outcome\n    __d['exit_code'] = exit_code\n    __d['final_state'] = final_state\n    __d['steps'] = steps\n    __d['duration_ms'] = duration_ms\n    __d['path'] = path\n    __d['run_dir'] = run_dir\n    __d['error'] = error\n"] = _60


def _61():
    def __init__(self, run_id, remove, why, size=_default_size):
        __d = self.__dict__
        __d['run_id'] = run_id
        __d['remove'] = remove
        __d['why'] = why
        __d['size'] = size
    return __init__

INITS["def __init__(self, run_id, remove, why, size=_default_size):\n    __d = self.__dict__\n    __d['run_id'] = run_id\n    __d['remove'] = remove\n    __d['why'] = why\n    __d['size'] = size\n"] = _61


def _62():
    def __init__(self, stack, cache):
        self.stack = stack
        self.cache = cache
    return __init__

INITS['def __init__(self, stack, cache):\n    self.stack = stack\n    self.cache = cache\n'] = _62


def _63():
    def __init__(self, start, end, namespace, path, modifier, default=_default_default):
        __d = self.__dict__
        __d['start'] = start
        __d['end'] = end
        __d['namespace'] = namespace
        __d['path'] = path
        __d['modifier'] = modifier
        __d['default'] = default
    return __init__

INITS["def __init__(self, start, end, namespace, path, modifier, default=_default_default):\n    __d = self.__dict__\n    __d['start'] = start\n    __d['end'] = end\n    __d['namespace'] = namespace\n    __d['path'] = path\n    __d['modifier'] = modifier\n    __d['default'] = default\n"] = _63


def _64():
    def __init__(self, start, message):
        __d = self.__dict__
        __d['start'] = start
        __d['message'] = message
    return __init__

INITS["def __init__(self, start, message):\n    __d = self.__dict__\n    __d['start'] = start\n    __d['message'] = message\n"] = _64


def _65():
    def __init__(self, state):
        __d = self.__dict__
        __d['state'] = state
    return __init__

INITS["def __init__(self, state):\n    __d = self.__dict__\n    __d['state'] = state\n"] = _65


def _66():
    def __init__(self, state, loop):
        __d = self.__dict__
        __d['state'] = state
        __d['loop'] = loop
    return __init__

INITS["def __init__(self, state, loop):\n    __d = self.__dict__\n    __d['state'] = state\n    __d['loop'] = loop\n"] = _66


def _67():
    def __init__(self, stdout, stderr, exit_code, timed_out, output_bytes, duration_ms, stdout_at=_default_stdout_at):
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.output_bytes = output_bytes
        self.duration_ms = duration_ms
        self.stdout_at = stdout_at
    return __init__

INITS['def __init__(self, stdout, stderr, exit_code, timed_out, output_bytes, duration_ms, stdout_at=_default_stdout_at):\n    self.stdout = stdout\n    self.stderr = stderr\n    self.exit_code = exit_code\n    self.timed_out = timed_out\n    self.output_bytes = output_bytes\n    self.duration_ms = duration_ms\n    self.stdout_at = stdout_at\n'] = _67


def _68():
    def __init__(self, step, state, loop, root, run_id, file, values, path, layer, program_context, timeout=_default_timeout, attempt=_default_attempt, branch=_default_branch, snapshot=_default_snapshot):
        __d = self.__dict__
        __d['step'] = step
        __d['state'] = state
        __d['loop'] = loop
        __d['root'] = root
        __d['run_id'] = run_id
        __d['file'] = file
        __d['values'] = values
        __d['path'] = path
        __d['layer'] = layer
        __d['program_context'] = program_context
        __d['timeout'] = timeout
        __d['attempt'] = attempt
        __d['branch'] = branch
        __d['snapshot'] = snapshot
    return __init__

INITS["def __init__(self, step, state, loop, root, run_id, file, values, path, layer, program_context, timeout=_default_timeout, attempt=_default_attempt, branch=_default_branch, snapshot=_default_snapshot):\n    __d = self.__dict__\n    __d['step'] = step\n    __d['state'] = state\n    __d['loop'] = loop\n    __d['root'] = root\n    __d['run_id'] = run_id\n    __d['file'] = file\n    __d['values'] = values\n    __d['path'] = path\n    __d['layer'] = layer\n    __d['program_context'] = program_context\n    __d['timeout'] = timeout\n    __d['attempt'] = attempt\n    __d['branch'] = branch\n    __d['snapshot'] = snapshot\n"] = _68


def _69():
    def __init__(self, step, state, started, ended, action=_default_action, action_type=_default_action_type, exit_code=_default_exit_code, duration_ms=_default_duration_ms, timed_out=_default_timed_out, eval_type=_default_eval_type, verdict=_default_verdict, details=_default_details, retries=_default_retries, attempts=_default_attempts, fail_open=_default_fail_open, why=_default_why, tail=_FACTORY, routed_to=_default_routed_to, via=_default_via, visit=_default_visit, logs=_FACTORY):
        self.step = step
        self.state = state
        self.started = started
        self.ended = ended
        self.action = action
        self.action_type = action_type
        self.exit_code = exit_code
        self.duration_ms = duration_ms
        self.timed_out = timed_out
        self.eval_type = eval_type
        self.verdict = verdict
        self.details = details
        self.retries = retries
        self.attempts = attempts
        self.fail_open = fail_open
        self.why = why
        self.tail = _factory_tail() if tail is _FACTORY else tail
        self.routed_to = routed_to
        self.via = via
        self.visit = visit
        self.logs = _factory_logs() if logs is _FACTORY else logs
    return __init__

INITS['def __init__(self, step, state, started, ended, action=_default_action, action_type=_default_action_type, exit_code=_default_exit_code, duration_ms=_default_duration_ms, timed_out=_default_timed_out, eval_type=_default_eval_type, verdict=_default_verdict, details=_default_details, retries=_default_retries, attempts=_default_attempts, fail_open=_default_fail_open, why=_default_why, tail=_FACTORY, routed_to=_default_routed_to, via=_default_via, visit=_default_visit, logs=_FACTORY):\n    self.step = step\n    self.state = state\n    self.started = started\n    self.ended = ended\n    self.action = action\n    self.action_type = action_type\n    self.exit_code = exit_code\n    self.duration_ms = duration_ms\n    self.timed_out = timed_out\n    self.eval_type = eval_type\n    self.verdict = verdict\n    self.details = details\n    self.retries = retries\n    self.attempts = attempts\n    self.fail_open = fail_open\n    self.why = why\n    self.tail = _factory_tail() if tail is _FACTORY else tail\n    self.routed_to = routed_to\n    self.via = via\n    self.visit = visit\n    self.logs = _factory_logs() if logs is _FACTORY else logs\n'] = _69


def _70():
    def __init__(self, target, tolerance, direction, source, previous):
        __d = self.__dict__
        __d['target'] = target
        __d['tolerance'] = tolerance
        __d['direction'] = direction
        __d['source'] = source
        __d['previous'] = previous
    return __init__

INITS["def __init__(self, target, tolerance, direction, source, previous):\n    __d = self.__dict__\n    __d['target'] = target\n    __d['tolerance'] = tolerance\n    __d['direction'] = direction\n    __d['source'] = source\n    __d['previous'] = previous\n"] = _70


def _71():
    def __init__(self, target, via):
        __d = self.__dict__
        __d['target'] = target
        __d['via'] = via
    return __init__

INITS["def __init__(self, target, via):\n    __d = self.__dict__\n    __d['target'] = target\n    __d['via'] = via\n"] = _71


def _72():
    def __init__(self, target, via, pos=_default_pos):
        __d = self.__dict__
        __d['target'] = target
        __d['via'] = via
        __d['pos'] = pos
    return __init__

INITS["def __init__(self, target, via, pos=_default_pos):\n    __d = self.__dict__\n    __d['target'] = target\n    __d['via'] = via\n    __d['pos'] = pos\n"] = _72


def _73():
    def __init__(self, text, stderr=_default_stderr, exit_code=_default_exit_code, state=_default_state, resolve=_default_resolve, previous_value=_default_previous_value, prior_reason=_default_prior_reason, judge=_default_judge, deadline=_default_deadline, program=_default_program):
        __d = self.__dict__
        __d['text'] = text
        __d['stderr'] = stderr
        __d['exit_code'] = exit_code
        __d['state'] = state
        __d['resolve'] = resolve
        __d['previous_value'] = previous_value
        __d['prior_reason'] = prior_reason
        __d['judge'] = judge
        __d['deadline'] = deadline
        __d['program'] = program
    return __init__

INITS["def __init__(self, text, stderr=_default_stderr, exit_code=_default_exit_code, state=_default_state, resolve=_default_resolve, previous_value=_default_previous_value, prior_reason=_default_prior_reason, judge=_default_judge, deadline=_default_deadline, program=_default_program):\n    __d = self.__dict__\n    __d['text'] = text\n    __d['stderr'] = stderr\n    __d['exit_code'] = exit_code\n    __d['state'] = state\n    __d['resolve'] = resolve\n    __d['previous_value'] = previous_value\n    __d['prior_reason'] = prior_reason\n    __d['judge'] = judge\n    __d['deadline'] = deadline\n    __d['program'] = program\n"] = _73


def _74():
    def __init__(self, type, pos=_default_pos, pattern=_default_pattern, literal=_default_literal, negate=_default_negate, source=_default_source, operator=_default_operator, target=_default_target, path=_default_path, tolerance=_default_tolerance, direction=_default_direction, previous=_default_previous, of=_default_of, prompt=_default_prompt, schema=_default_schema, min_confidence=_default_min_confidence, uncertain_suffix=_default_uncertain_suffix, model=_default_model, max_tokens=_default_max_tokens, timeout=_default_timeout, max_output_chars=_default_max_output_chars, fail_open=_default_fail_open, prior_reason=_default_prior_reason, samples=_default_samples, judge=_default_judge, rubric_file=_default_rubric_file, examples=_default_examples, temperature=_default_temperature, models=_default_models, reference=_default_reference):
        __d = self.__dict__
        __d['type'] = type
        __d['pos'] = pos
        __d['pattern'] = pattern
        __d['literal'] = literal
        __d['negate'] = negate
        __d['source'] = source
        __d['operator'] = operator
        __d['target'] = target
        __d['path'] = path
        __d['tolerance'] = tolerance
        __d['direction'] = direction
        __d['previous'] = previous
        __d['of'] = of
        __d['prompt'] = prompt
        __d['schema'] = schema
        __d['min_confidence'] = min_confidence
        __d['uncertain_suffix'] = uncertain_suffix
        __d['model'] = model
        __d['max_tokens'] = max_tokens
        __d['timeout'] = timeout
        __d['max_output_chars'] = max_output_chars
        __d['fail_open'] = fail_open
        __d['prior_reason'] = prior_reason
        __d['samples'] = samples
        __d['judge'] = judge
        __d['rubric_file'] = rubric_file
        __d['examples'] = examples
        __d['temperature'] = temperature
        __d['models'] = models
        __d['reference'] = reference
    return __init__

INITS["def __init__(self, type, pos=_default_pos, pattern=_default_pattern, literal=_default_literal, negate=_default_negate, source=_default_source, operator=_default_operator, target=_default_target, path=_default_path, tolerance=_default_tolerance, direction=_default_direction, previous=_default_previous, of=_default_of, prompt=_default_prompt, schema=_default_schema, min_confidence=_default_min_confidence, uncertain_suffix=_default_uncertain_suffix, model=_default_model, max_tokens=_default_max_tokens, timeout=_default_timeout, max_output_chars=_default_max_output_chars, fail_open=_default_fail_open, prior_reason=_default_prior_reason, samples=_default_samples, judge=_default_judge, rubric_file=_default_rubric_file, examples=_default_examples, temperature=_default_temperature, models=_default_models, reference=_default_reference):\n    __d = self.__dict__\n    __d['type'] = type\n    __d['pos'] = pos\n    __d['pattern'] = pattern\n    __d['literal'] = literal\n    __d['negate'] = negate\n    __d['source'] = source\n    __d['operator'] = operator\n    __d['target'] = target\n    __d['path'] = path\n    __d['tolerance'] = tolerance\n    __d['direction'] = direction\n    __d['previous'] = previous\n    __d['of'] = of\n    __d['prompt'] = prompt\n    __d['schema'] = schema\n    __d['min_confidence'] = min_confidence\n    __d['uncertain_suffix'] = uncertain_suffix\n    __d['model'] = model\n    __d['max_tokens'] = max_tokens\n    __d['timeout'] = timeout\n    __d['max_output_chars'] = max_output_chars\n    __d['fail_open'] = fail_open\n    __d['prior_reason'] = prior_reason\n    __d['samples'] = samples\n    __d['judge'] = judge\n    __d['rubric_file'] = rubric_file\n    __d['examples'] = examples\n    __d['temperature'] = temperature\n    __d['models'] = models\n    __d['reference'] = reference\n"] = _74


def _75():
    def __init__(self, value, path, pos, anchor, size=_default_size, key=_default_key, key_pos=_FACTORY, is_merge=_default_is_merge, merged=_FACTORY, seen=_FACTORY):
        self.value = value
        self.path = path
        self.pos = pos
        self.anchor = anchor
        self.size = size
        self.key = key
        self.key_pos = _factory_key_pos() if key_pos is _FACTORY else key_pos
        self.is_merge = is_merge
        self.merged = _factory_merged() if merged is _FACTORY else merged
        self.seen = _factory_seen() if seen is _FACTORY else seen
    return __init__

INITS['def __init__(self, value, path, pos, anchor, size=_default_size, key=_default_key, key_pos=_FACTORY, is_merge=_default_is_merge, merged=_FACTORY, seen=_FACTORY):\n    self.value = value\n    self.path = path\n    self.pos = pos\n    self.anchor = anchor\n    self.size = size\n    self.key = key\n    self.key_pos = _factory_key_pos() if key_pos is _FACTORY else key_pos\n    self.is_merge = is_merge\n    self.merged = _factory_merged() if merged is _FACTORY else merged\n    self.seen = _factory_seen() if seen is _FACTORY else seen\n'] = _75


def _76():
    def __init__(self, values=_FACTORY, keys=_FACTORY, comments=_FACTORY):
        self.values = _factory_values() if values is _FACTORY else values
        self.keys = _factory_keys() if keys is _FACTORY else keys
        self.comments = _factory_comments() if comments is _FACTORY else comments
    return __init__

INITS['def __init__(self, values=_FACTORY, keys=_FACTORY, comments=_FACTORY):\n    self.values = _factory_values() if values is _FACTORY else values\n    self.keys = _factory_keys() if keys is _FACTORY else keys\n    self.comments = _factory_comments() if comments is _FACTORY else comments\n'] = _76


def _77():
    def __init__(self, verdict, action, reason=_default_reason, record=_default_record):
        __d = self.__dict__
        __d['verdict'] = verdict
        __d['action'] = action
        __d['reason'] = reason
        __d['record'] = record
    return __init__

INITS["def __init__(self, verdict, action, reason=_default_reason, record=_default_record):\n    __d = self.__dict__\n    __d['verdict'] = verdict\n    __d['action'] = action\n    __d['reason'] = reason\n    __d['record'] = record\n"] = _77


def _78():
    def __init__(self, verdict, details=_default_details):
        __d = self.__dict__
        __d['verdict'] = verdict
        __d['details'] = details
    return __init__

INITS["def __init__(self, verdict, details=_default_details):\n    __d = self.__dict__\n    __d['verdict'] = verdict\n    __d['details'] = details\n"] = _78


def _79():
    def __init__(self, verdict, note, duration_ms=_default_duration_ms):
        __d = self.__dict__
        __d['verdict'] = verdict
        __d['note'] = note
        __d['duration_ms'] = duration_ms
    return __init__

INITS["def __init__(self, verdict, note, duration_ms=_default_duration_ms):\n    __d = self.__dict__\n    __d['verdict'] = verdict\n    __d['note'] = note\n    __d['duration_ms'] = duration_ms\n"] = _79


def _80():
    def __init__(self, verdict, outcome=_default_outcome, record=_FACTORY, pending=_default_pending):
        __d = self.__dict__
        __d['verdict'] = verdict
        __d['outcome'] = outcome
        __d['record'] = _factory_record() if record is _FACTORY else record
        __d['pending'] = pending
    return __init__

INITS["def __init__(self, verdict, outcome=_default_outcome, record=_FACTORY, pending=_default_pending):\n    __d = self.__dict__\n    __d['verdict'] = verdict\n    __d['outcome'] = outcome\n    __d['record'] = _factory_record() if record is _FACTORY else record\n    __d['pending'] = pending\n"] = _80
