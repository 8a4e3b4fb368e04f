"""Another machine's environment: the JSON ``xpubench env --json`` printed there (``run --dry-run
--env-file FILE`` plans that machine's sweep here). Checked enough that planning can trust its shape;
anything wrong is one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xpubench.errors import UserError

HOW = "save it on that machine with `xpubench env --json > FILE`"


def load_environment(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--env-file {path}: no such file ({HOW})")
    try:
        env = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--env-file {path} is unreadable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"--env-file {path} is not JSON ({exc.msg}, line {exc.lineno}); {HOW}") from None
    problem = _shape_problem(env)
    if problem:
        raise UserError(f"--env-file {path} is not an environment record: {problem}; {HOW}")
    return env


def _shape_problem(env: Any) -> str | None:
    if not isinstance(env, dict) or not isinstance(env.get("host"), dict) or not isinstance(env.get("backends"), dict):
        return "it needs \"host\" and \"backends\" objects"
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
