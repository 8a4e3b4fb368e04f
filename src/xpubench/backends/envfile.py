"""Another machine's environment: the JSON ``xpubench env --json`` printed there (``run --dry-run
--env-file FILE`` plans that machine's sweep here). Checked enough that planning can trust its shape;
anything wrong is one line (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xpubench import readfile
from xpubench.errors import UserError
from xpubench.results.validate import FINGERPRINT, Invalid

MAX_BYTES = 16 * readfile.MiB

HOW = "save it on that machine with `xpubench env --json > FILE`"


def load_environment(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise UserError(f"--env-file {path}: no such file ({HOW})")
    try:   # a regular file, bounded, strict JSON (readfile.py)
        env = readfile.loads_json(readfile.read_text(p, "--env-file", MAX_BYTES), f"--env-file {path}")
    except UserError as exc:
        raise UserError(f"{exc}; {HOW}") from None
    problem = _shape_problem(env)
    if problem:
        raise UserError(f"--env-file {path} is not an environment record: {problem}; {HOW}")
    return env


def _shape_problem(env: Any) -> str | None:
    if not isinstance(env, dict) or not isinstance(env.get("host"), dict) or not isinstance(env.get("backends"), dict):
        return "it needs \"host\" and \"backends\" objects"
    try:   # the same fields a results file's fingerprint holds: the same checks (results/validate.py)
        FINGERPRINT(env, "environment")
    except Invalid as exc:
        return str(exc)
    for name, info in env["backends"].items():
        if not isinstance(info, dict) or not isinstance(info.get("installed"), bool):
            return f"backend {name!r} has no \"installed\" flag"
        devices = info.get("devices", [])
        if not isinstance(devices, list) or not all(isinstance(d, dict) and isinstance(d.get("id"), str)
                                                    and isinstance(d.get("kind"), str) for d in devices):
            return f"backend {name!r}: every device needs an \"id\" and a \"kind\""
    if "variables" in env and not isinstance(env["variables"], dict):
        return "\"variables\" must be an object"
    return None
