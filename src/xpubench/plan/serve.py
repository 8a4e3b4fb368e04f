"""The serve mode planned like every other (docs/serving.md): a sweep's points are cases, one per load --
``users`` (closed loop) or a Poisson ``rate`` with a cap of users (open loop) -- of each served model on each
engine and device, so repetitions are processes (``--repeat K``, ``--processes K``), ``--resume`` finishes a
sweep, the run's budget applies and ``compare`` matches points by their keys.

Who serves:
- a server started here: each named backend whose record has a server (``Backend.server()``: llama.cpp's
  llama-server, vLLM, SGLang); one without is left out and the plan's notes say so (``notes``). It serves the
  workload's model (a workload whose record says it can be ``served``): a named shape with random weights,
  a ``--weights`` checkpoint folder, or a GGUF file given as it is (``gguf``), in a format of the engine's
  (``-p int8`` or ``--format q8_0`` is llama.cpp's q8_0), on the first accelerator the engine sees, else the CPU;
- a server at a URL (``options["url"]``): what it says about itself names its engine and format
  (serve/server.py ``provenance``); the device is the one ``-d`` names, else ``remote``.

What identifies a served model (a point's key, serve/record.py): the name it is served under -- the engine
started here serves it under the case's own (``--alias``, ``--served-model-name``), so a URL sweep of that
server reads the same name from ``/v1/models`` -- its engine, the device it runs on and its format. So the
points of a started server and of a ``--url`` sweep of the same server key alike (give the URL sweep the
device: ``-d cpu``). ``--label`` names both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xpubench import backends
from xpubench.case import SERVE, SERVE_KEY_OPTIONS, Case
from xpubench.devices.device import Device, is_accelerator
from xpubench.errors import UserError
from xpubench.serve.keys import AS_SERVED, BACKEND, OPEN_CAP, REMOTE

DEFAULT_USERS = (1, 2, 4)
OPEN_SLOTS = 8         # a started server's slots for rate points alone (more wait in its queue)
CHAT_OVERHEAD = 64     # a chat template's tokens around the prompt, room kept in each slot's context
LENGTHS = (1024, 1024)  # input and output tokens (--lengths 1k/1k, InferenceX's)
DEFAULTS = {"endpoint": "completions", "request_timeout_s": 120.0, "point_timeout_s": 600.0, "prompts": "random",
            "ignore_eos": True}
LOAD_OPTIONS = ("endpoint", "requests", "warmup", "duration_s", "request_timeout_s", "point_timeout_s", "prompts",
                "ignore_eos", "slo", "price_per_hour", "served_model", "threads", "slots")


def points(users: list[int] | None, rates: list[float] | None) -> list[tuple[int, float | None]]:
    """(users, rate) of each point, from the lightest: the closed-loop users, then the rates (capped at the
    largest users, else OPEN_CAP)."""
    closed = sorted(set(users or ([] if rates else DEFAULT_USERS)))
    cap = max(users) if users else OPEN_CAP
    return [(u, None) for u in closed] + [(cap, float(r)) for r in sorted(set(rates or []))]


def check(req) -> None:
    """The serve points asked, checked without the machine (plan.validation.validate): one line each."""
    for v in req.rates or []:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise UserError(f"a rate must be a number of requests per second above 0, got {v!r}")
    if (req.users or req.rates or req.options.get("url")) and SERVE not in (req.modes or []):
        raise UserError("--concurrency, --rate and a server's url are a serve sweep's: add --mode serve")


def serve_cases(req, env: dict, workloads: list) -> list[Case]:
    """The serve points of the request (module docstring); ``workloads``: the request's records."""
    options = {**DEFAULTS, **req.options}
    if options.get("url"):
        return _cases(req, options, *_at_url(req, options))
    served = [w for w in workloads if w.served]
    if not served:
        raise UserError("--mode serve serves a model an engine's server can load (-w llama: a named shape, "
                        "--weights DIR or a GGUF file)")
    from xpubench.plan.defaults import choose_devices

    out: list[Case] = []
    for backend in [b for b in req.backends or [] if _server(b) is not None]:
        spec = _server(backend)
        for device in _devices(choose_devices(env, [backend], req.devices, implicit=False)[backend], req.devices):
            for workload in served:
                for fmt in _formats(req, options, backend, spec):
                    model = _model(workload, options, spec, fmt, backend)
                    out += _cases(req, options | model, backend, device, *_named(options, model, fmt), spec=spec)
    if not out:
        raise UserError("--mode serve starts an engine's server: name one with -b "
                        f"({', '.join(n for n in backends.names() if _server(n))})")
    return out


def notes(req) -> list[str]:
    """What the plan says of the serve mode: a named backend without a server is left out, and why."""
    if SERVE not in (req.modes or []) or "url" in req.options:
        return []
    engines = ", ".join(n for n in backends.names() if _server(n))
    return [f"{b}: no server to start, its serve points are left out (--mode serve starts an engine's server: "
            f"{engines})" for b in req.backends or [] if _server(b) is None]


def _server(backend: str):
    return backends.record(backend).server() if backends.known(backend) else None


def _devices(found: list[str], asked: list[str] | None) -> list[str]:
    """The asked devices; else the first accelerator the engine sees, else its CPU."""
    if asked:
        return found
    accelerators = [d for d in found if is_accelerator(d)]
    return accelerators[:1] or found[:1]


def _formats(req, options: dict, backend: str, spec) -> list[str]:
    """The engine's names of the formats asked (``--format``, else ``-p``), else its default."""
    asked = [options["format"]] if options.get("format") else req.precisions or [spec.default_format]
    out = []
    for name in asked:
        fmt = spec.format_of(str(name))
        if fmt is None:
            raise UserError(f"{backend} serves {', '.join(sorted(set(spec.formats)))}, not {name}")
        out.append(fmt)
    return list(dict.fromkeys(out))


def _model(workload, options: dict, spec, fmt: str, backend: str) -> dict[str, Any]:
    """What the server loads: {"weights": an absolute path} (a GGUF file, a checkpoint folder) or
    {"preset": a named shape}, with the name it is known by (``name``) and its format (``format``)."""
    from xpubench.plan.resolve import pinned

    if options.get("gguf"):
        if spec.serves != "gguf":
            raise UserError(f"{backend} serves a checkpoint folder (--weights DIR), not a GGUF file")
        from xpubench.serve.model import given_file

        given = given_file(Path(options["gguf"]).expanduser().resolve())
        return {"weights": str(given.path), "name": given.label, "format": given.weight_format}
    typed = workload.options_of(pinned(workload, {k: v for k, v in options.items() if k in ("preset", "weights")}))
    weights = getattr(typed, "weights_path", None)
    if spec.serves != "gguf":
        if not weights:
            raise UserError(f"{backend} serves a checkpoint folder with its tokenizer: give --weights DIR")
        if not any((Path(weights) / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
            raise UserError(f"--weights {weights}: no tokenizer.json or tokenizer.model in it ({backend} tokenises "
                            "the prompts with the checkpoint's own tokenizer)")
        return {"weights": weights, "name": typed.weights_id, "format": fmt}
    if weights:
        return {"weights": weights, "name": typed.weights_id, "format": fmt}
    return {"preset": typed.preset, "name": typed.preset, "format": fmt}


def _named(options: dict, model: dict, fmt: str) -> tuple[str, str]:
    """(the case's workload: the name the model is served under, its format): ``--label``, else the model's
    name and format (``smollm-135m-q8_0``; a GGUF file's own name as it is)."""
    fmt = model["format"]
    if options.get("label"):
        return options["label"], fmt
    return (model["name"] if options.get("gguf") else f"{model['name']}-{fmt}"), fmt


def _at_url(req, options: dict) -> tuple[str, str, str, str]:
    """(engine, device, name, format) of the server at the URL, from what it says about itself."""
    from xpubench.serve.host import setup_timeout_s
    from xpubench.serve.server import provenance

    url = options["url"]
    info, first = provenance(url, setup_timeout_s(options), req.headers)
    engine = next((n for n in backends.names() if (s := _server(n)) and s.identified_by
                   and _said(info, s.identified_by)), BACKEND)
    spec = _server(engine) if engine != BACKEND else None
    said = (info.get("props") or {}).get("model_ftype") or options.get("format")
    fmt = (spec.format_of(str(said)) if spec and said else None) or (str(said).lower() if said else AS_SERVED)
    name = options.get("label") or (options.get("served_model") or first or "unknown").rsplit("/", 1)[-1]
    devices = req.devices or [REMOTE]
    if len(devices) > 1:
        raise UserError("--url: one server, one device (-d names the device it runs on)")
    device = devices[0]
    if device != REMOTE:
        try:
            device = str(Device.parse(device))
        except ValueError as exc:
            raise UserError(f"-d {device}: {exc}") from None
    return engine, device, name, fmt


def _said(info: dict, path: str) -> Any:
    """The value at a dotted ``path`` of a server's description (``props.build_info``), or None."""
    for part in path.split("."):
        info = info.get(part) if isinstance(info, dict) else None
    return info


def _cases(req, options: dict, backend: str, device: str, name: str, fmt: str, spec=None) -> list[Case]:
    """One case per point of the served model ``name`` in ``fmt`` on ``backend``'s server on ``device``."""
    from xpubench.serve.bounded import TEXT

    inp = int(options.get("input_len") or options.get("prompt_len") or LENGTHS[0])
    out = int(options.get("output_len") or options.get("new_tokens") or LENGTHS[1])
    swept = points(req.users, req.rates)
    own = {k: options[k] for k in LOAD_OPTIONS if options.get(k) is not None}
    own |= {k: options[k] for k in ("url", "weights", "preset") if options.get(k)}
    own |= {"input_len": inp, "output_len": out}
    if spec is not None:   # started here: its slots (one per user; rate points alone: OPEN_SLOTS) and context
        closed = [u for u, r in swept if r is None]
        own.setdefault("slots", max(closed) if closed else OPEN_SLOTS)
        own["context"] = inp + out + CHAT_OVERHEAD
        if spec.threads:   # where the server takes a thread count: this process's usable cores
            own.setdefault("threads", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count() or 1)
    label = name if len(name) <= TEXT else name[:TEXT] + "..."
    return [Case(workload=label, backend=backend, device=device, mode=SERVE, precision=fmt, users=users,
                 rate=rate, seed=req.seed, key_options=SERVE_KEY_OPTIONS,
                 options=own | {"requests": _requests(options, users, rate), "warmup": _warmup(options, users, rate)})
            for users, rate in swept]


def _requests(options: dict, users: int, rate: float | None) -> int:
    if options.get("requests") is not None:
        return int(options["requests"])
    return max(8, 4 * users) if rate is None else max(8, round(8 * rate))


def _warmup(options: dict, users: int, rate: float | None) -> int:
    if options.get("warmup") is not None:
        return int(options["warmup"])
    return users if rate is None else 1

