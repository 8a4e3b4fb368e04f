"""The resolved case (case.py, plan/resolve.py; docs/architecture.md "The resolved case"): the planner makes
every choice once, a case missing one is refused when it is made (nothing downstream fills it in), its
options are read-only, a --weights key names the model and its digest, and llama's --decode is carried
(and keyed) by torch's cases only. Nothing here runs a model."""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
from pathlib import Path

import pytest

from xpubench.case import Case, UnresolvedCase
from xpubench.plan import PlanRequest, build_cases
from xpubench.workloads.llama import checkpoint as ck
from xpubench.workloads.llama.config import LlamaConfig

TINY = LlamaConfig("tiny", n_layers=1, hidden_size=16, n_heads=2, n_kv_heads=1, head_dim=8, intermediate_size=32,
                   vocab_size=64, max_positions=128, tie_embeddings=True)


def cpu_env(*names: str) -> dict:
    device = {"id": "cpu", "kind": "cpu", "memory_bytes": 24 << 30}
    return {"host": {"cpu": {"flags": ["avx2"], "usable_cores": 2, "peak_estimate": {"fp32": {"value": 2e11}}}},
            "backends": {b: {"installed": True, "version": "1", "devices": [dict(device)]}
                         for b in ("numpy", "torch", "jax", *names)},
            "variables": {}}


@pytest.mark.parametrize("fields, missing", [
    ({"workload": "mnist_cnn", "mode": "train"}, "without a batch size"),
    ({"workload": "llama", "mode": "generate"}, "without a batch size"),
    ({"workload": "mnist_cnn", "mode": "infer", "batch_size": 0}, "batch_size is a whole number"),
    ({"workload": "mnist_cnn", "mode": "infer", "batch_size": True}, "batch_size is a whole number"),
    ({"workload": "matmul", "mode": "matmul", "size": 0}, "size is a whole number"),
    ({"workload": "matmul", "mode": "matmul", "size": 1024, "devices": 0}, "devices is a whole number"),
    ({"workload": "mnist_cnn", "mode": "train", "batch_size": 8, "epochs": 2.5}, "epochs is a whole number"),
])
def test_a_case_missing_what_the_planner_decides_is_refused_when_made(fields, missing):
    with pytest.raises(UnresolvedCase, match=missing):
        Case(backend="torch", device="cpu", **fields)
    base = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="train", batch_size=64)
    with pytest.raises(UnresolvedCase, match="without a batch size"):
        dataclasses.replace(base, batch_size=None)   # a changed case is checked as a new one


def test_the_worker_refuses_an_unresolved_case_rather_than_default_it(tmp_path):
    """A case file without a batch size (a planner bug, a hand-edited file) is refused in the worker before
    anything runs: no default batch size is applied downstream of the planner."""
    from xpubench.launch import worker

    case = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="train", batch_size=64).as_dict()
    case.pop("batch_size")
    (tmp_path / "case.json").write_text(json.dumps(case))
    with pytest.raises(UnresolvedCase, match="without a batch size"):
        worker.main([str(tmp_path / "case.json"), str(tmp_path / "result.json")])
    assert not (tmp_path / "result.json").exists()


def test_a_cases_options_are_read_only_and_travel_whole():
    case = Case(workload="gpt", backend="torch", device="cpu", mode="train", batch_size=8,
                options={"preset": "tiny", "model_input": {"input_shape": [4]}})
    for mutate in (lambda o: o.__setitem__("preset", "small"), lambda o: o.update(preset="small"),
                   lambda o: o.pop("preset"), lambda o: o.clear(), lambda o: setattr(o, "extra", {})):
        with pytest.raises((TypeError, AttributeError)):
            mutate(case.options)
    case.options.as_dict()["preset"] = "small"                # a copy: the case's own are unchanged
    assert case.options == {"preset": "tiny", "model_input": {"input_shape": [4]}}
    assert pickle.loads(pickle.dumps(case)) == case            # DDP ranks and spawn receive it pickled
    again = Case.from_dict(json.loads(json.dumps(case.as_dict())))   # the worker's case.json, the plan sidecar
    assert again == case and again.run_id == case.run_id and again.key == case.key
    changed = dataclasses.replace(case, options=case.options.replace(preset="small"))
    assert changed.options["preset"] == "small" and case.options["preset"] == "tiny"


def test_a_planned_case_carries_its_workloads_typed_options_and_a_worker_reads_them_back():
    """The planner builds the workload's own options (``Workload.Options``) once; the record holds what was
    given (the format of older files), and the worker's case file reads back the same typed options, key
    and run id (``with_identity``), so nothing downstream reads an option through a default of its own."""
    from xpubench.workloads import get_workload, with_identity
    from xpubench.workloads.gpt import GPTOptions
    from xpubench.workloads.llama.options import LlamaOptions

    cases = build_cases(PlanRequest(workloads=["llama", "gpt"], backends=["torch"], precisions=["fp32"],
                                    modes=["infer"], batch_sizes=[1], options={"n_layers": 2, "prompt_len": 8,
                                                                               "sync": "step"}), cpu_env())
    llama = next(c for c in cases if c.workload == "llama")
    gpt = next(c for c in cases if c.workload == "gpt")
    assert type(llama.options) is LlamaOptions and type(gpt.options) is GPTOptions
    assert (llama.options.n_layers, llama.options.prompt_len, llama.options.decode) == (2, 8, "compiled")
    assert llama.options.hidden_size is None and gpt.options.preset == "small"   # declared defaults, typed
    assert llama.options.as_dict() == {"n_layers": 2, "prompt_len": 8, "sync": "step", "decode": "compiled"}
    assert gpt.options.as_dict() == {"prompt_len": 8, "n_layers": 2, "sync": "step"}   # others' kept as given
    assert gpt.options.extra == {"n_layers": 2, "sync": "step"} and gpt.options.n_layer is None
    assert llama.as_dict()["options"] == llama.options.as_dict()        # the record: a JSON object, as before
    for case in (llama, gpt):
        read = with_identity(Case.from_dict(json.loads(json.dumps(case.as_dict()))))
        assert type(read.options) is type(case.options) and read.options == case.options
        assert (read.key, read.run_id) == (case.key, case.run_id)
        workload = get_workload(case.workload)
        assert workload.spec_for(read.options) == workload.spec_for(case.options)


@pytest.mark.parametrize("options, lacks", [
    ({"weights": "/models/tiny"}, "--weights not pinned"),
    ({"weights": "/models/tiny", "weights_path": "/models/tiny"}, "--weights not pinned"),
    ({"depth": [0, 512]}, "a list of depth"),
    ({"decode": ["compiled", "eager"]}, "a list of decode"),
])
def test_a_case_whose_options_lack_what_the_planner_decides_is_refused_when_made(tmp_path, options, lacks):
    """A llama case whose --weights checkpoint was not pinned (its folder and digest: the worker would have to
    find and read it for itself) or whose sweep was not split is refused when its typed options are its
    case's: in the worker, before anything runs, not resolved there."""
    from xpubench.launch import worker
    from xpubench.workloads.llama.options import LlamaOptions

    with pytest.raises(UnresolvedCase, match=lacks):
        Case(workload="llama", backend="torch", device="cpu", mode="generate", batch_size=1,
             options=LlamaOptions.of(options))
    as_recorded = Case(workload="llama", backend="torch", device="cpu", mode="generate", batch_size=1,
                       options=options)   # read without its workload (a record): kept as given
    (tmp_path / "case.json").write_text(json.dumps(as_recorded.as_dict()))
    with pytest.raises(UnresolvedCase, match=lacks):
        worker.main([str(tmp_path / "case.json"), str(tmp_path / "result.json")])
    assert not (tmp_path / "result.json").exists()


def test_every_planned_case_is_resolved():
    """The planner gives every model case a batch size (the selftest included) and every matmul case a size."""
    cases = build_cases(PlanRequest(workloads=["matmul", "mnist_cnn", "llama", "selftest"], backends=["numpy", "torch"],
                                    precisions=["fp32"]), cpu_env())
    assert {c.workload for c in cases} == {"matmul", "mnist_cnn", "llama", "selftest"}
    for case in cases:
        assert (case.size if case.mode == "matmul" else case.batch_size) >= 1, case.key


def _checkpoint(root: Path) -> Path:
    return ck.write_checkpoint(root, TINY, ck.random_hf_tensors(TINY))


def test_a_weights_key_names_the_model_and_its_digest_not_the_path(tmp_path, monkeypatch):
    first = _checkpoint(tmp_path / "a" / "tiny")
    second = tmp_path / "b" / "tiny"
    shutil.copytree(first, second)                          # the same checkpoint, elsewhere
    monkeypatch.chdir(tmp_path)
    digest = ck.open_checkpoint(first).sha256

    def planned(path: str) -> Case:
        (case,) = build_cases(PlanRequest(workloads=["llama"], backends=["torch"], precisions=["fp32"],
                                          options={"weights": path, "decode": "eager"}), cpu_env())
        return case

    typed, moved, relative = planned(str(first)), planned(str(second)), planned("a/tiny")
    assert typed.key == moved.key == relative.key == f"llama/torch/cpu/generate/fp32/b1/tiny@{digest[:12]}/eager"
    assert str(tmp_path) not in typed.key
    assert relative.options["weights_path"] == str(first.resolve())      # absolute: resumes from anywhere
    assert (relative.options["weights_sha256"], relative.options["weights"]) == (digest, "a/tiny")  # as typed


def test_decode_is_a_torch_option_carried_and_keyed_by_torch_cases_only():
    cases = build_cases(PlanRequest(workloads=["llama"], backends=["torch", "jax", "llamacpp"], precisions=["fp32"],
                                    options={"decode": ["compiled", "eager"], "n_layers": 2}), cpu_env("llamacpp"))
    by_backend = {b: [c for c in cases if c.backend == b] for b in ("torch", "jax", "llamacpp")}
    assert sorted(c.options["decode"] for c in by_backend["torch"]) == ["compiled", "eager"]
    assert [c.key.rsplit("/", 1)[1] for c in by_backend["torch"]] == ["compiled", "eager"]
    for backend in ("jax", "llamacpp"):   # one case each, neither carrying nor keyed by torch's choice
        (case,) = by_backend[backend]
        assert "decode" not in case.options and not case.key.endswith(("compiled", "eager")), case.key


def test_the_brief_run_does_not_skip_llamacpp_for_torchs_decode_step(monkeypatch):
    """The brief run's torch case carries its decode step (compiled, as -w llama's: issue 52); llama.cpp's
    case is not refused for it: it does not carry the option."""
    from xpubench import backends

    cases = build_cases(PlanRequest(workloads=["llama"], backends=["torch", "llamacpp"], quick=True),
                        cpu_env("llamacpp"))
    torch_case = next(c for c in cases if c.backend == "torch")
    cpp_case = next(c for c in cases if c.backend == "llamacpp")
    assert torch_case.options["decode"] == "compiled" and "decode" not in cpp_case.options
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("XPUBENCH_LLAMACPP_DIR", "/nonexistent")
    reason = backends.get("llamacpp").unsupported(cpp_case) or ""
    assert "decode" not in reason


def test_save_weights_is_resolved_by_the_planner_not_the_cli(tmp_path, monkeypatch):
    """--save-weights, from a flag, a TOML file or a notebook keyword, is one absolute folder in the case."""
    monkeypatch.chdir(tmp_path)
    (case,) = build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["torch"], precisions=["fp32"],
                                      batch_sizes=[32], options={"weights_dir": "kept"}), cpu_env())
    assert case.options["weights_dir"] == str(tmp_path / "kept")
    (tmp_path / "a-file").write_text("")
    from xpubench.errors import UserError

    with pytest.raises(UserError, match="that is a file, not a folder"):
        build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["torch"], options={"weights_dir": "a-file"}),
                    cpu_env())


def test_an_older_files_keys_are_read_as_this_version_gives_them():
    """A recorded jax llama case carried torch's decode step in its key (default-zen3-quiet.jsonl, before
    --decode was torch's alone): loaded, it is keyed as a new plan keys it, so the files compare; torch's
    own decode step stays in its key, and the line in the file is left as written. The key is the migrated
    case's (results/schema.py, version 3: read once, when the file is loaded)."""
    from xpubench import analysis
    from xpubench.plan.resolve import recorded_case

    path = Path(__file__).parent / "data" / "runs" / "default-zen3-quiet.jsonl"
    assert "llama/jax/cpu/generate/fp32/b1/4/64/16/eager" in path.read_text()
    keys = {r.key for f in analysis.load([path]) for r in f.results if r.case.workload == "llama"}
    new = {c.key for c in build_cases(PlanRequest(quick=True), cpu_env()) if c.workload == "llama"}
    assert keys == {"llama/jax/cpu/generate/fp32/b1/4/64/16", "llama/torch/cpu/generate/fp32/b1/4/64/16/eager"}
    assert new == {"llama/jax/cpu/generate/fp32/b1/4/64/16", "llama/torch/cpu/generate/fp32/b1/4/64/16/compiled"}
    old = {"workload": "llama", "backend": "torch", "device": "cpu", "mode": "generate", "precision": "fp32",
           "batch_size": 1, "key": "llama/torch/cpu/generate/fp32/b1//home/me/ckpt/eager",
           "key_options": ["weights", "decode"],
           "options": {"weights": "/home/me/ckpt", "weights_path": "/home/me/ckpt", "weights_sha256": "ab" * 32,
                       "decode": "eager"}}
    assert recorded_case(old, 2).key == "llama/torch/cpu/generate/fp32/b1/ckpt@abababababab/eager"
    assert recorded_case(old, 3).key == old["key"]         # a version 3 line: the case as written, nothing migrated
    unknown = recorded_case({**old, "workload": "not-a-workload"}, 2)   # a workload this version does not know:
    assert unknown.key == old["key"].replace("llama", "not-a-workload")  # its recorded fields, as given


def test_a_checkpoints_headers_are_read_once_per_process(tmp_path, monkeypatch):
    """The plan (validation, the pin, every case's spec and estimate) reads them once and pins the
    architecture in the case; a worker makes its spec from the case without opening the checkpoint, and
    its model builder opens it once, refusing a changed one (the pinned digest)."""
    from xpubench.errors import UserError
    from xpubench.workloads import get_workload
    from xpubench.workloads.llama import models, options

    root = _checkpoint(tmp_path / "tiny")
    reads = []
    opened = ck.open_checkpoint
    monkeypatch.setattr(ck, "open_checkpoint", lambda *a, **k: reads.append(a) or opened(*a, **k))
    options._checkpoint.cache_clear()
    cases = build_cases(PlanRequest(workloads=["llama"], backends=["torch", "jax"], precisions=["fp32", "bf16"],
                                    options={"weights": str(root)}), cpu_env())
    assert len(cases) == 4 and len(reads) == 1
    options._checkpoint.cache_clear()   # a worker process
    llama = get_workload("llama")
    spec = llama.spec_for(cases[0].options)
    assert spec.config == opened(root).config                              # the architecture the plan pinned
    reads.clear()
    assert llama.spec_for(cases[0].options) == spec and reads == []        # the spec: from the case alone
    assert models.checkpoint_of(spec).sha256 == cases[0].options["weights_sha256"] and len(reads) == 1
    config = root / "config.json"
    config.write_text(config.read_text().replace("1e-05", "1e-06"))
    with pytest.raises(UserError, match="changed since the run was planned"):
        models.checkpoint_of(spec)
    assert len(reads) == 2


def test_every_recorded_case_reads_back_as_its_workloads_typed_options_unchanged():
    """Every case recorded under tests/data (files of earlier versions included) is read into its workload's
    ``Options`` (keys it does not declare kept as given) and written back as the same JSON object, with the
    same key and run id: the record format does not change. An old selftest record (no batch size) is the
    one kind this version refuses as a case, as it refuses an old plan sidecar holding one."""
    from xpubench.workloads import REGISTRY, get_workload, with_identity

    data = Path(__file__).parent / "data"
    read = refused = typed = 0
    for path in sorted(data.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                recorded = json.loads(line)["case"]
            except (ValueError, KeyError, TypeError):
                continue   # a deliberately torn or foreign line
            if not isinstance(recorded, dict) or recorded.get("workload") not in REGISTRY:
                continue
            try:
                case = with_identity(Case.from_dict(recorded))
            except UnresolvedCase as exc:
                assert recorded["workload"] == "selftest" and "batch size" in str(exc), (path.name, exc)
                refused += 1
                continue
            assert isinstance(case.options, get_workload(case.workload).Options), path.name
            assert case.as_dict()["options"] == (recorded.get("options") or {}), path.name
            if "run_id" in recorded:
                assert case.run_id == recorded["run_id"], (path.name, recorded.get("key"))
            read += 1
            typed += bool(case.options.given)   # a field of the workload's own read from the record
    assert read >= 80 and typed >= 10 and refused <= 4, (read, typed, refused)
