"""JAX model initialisation is one compiled program (issue 32, item 8): run eagerly, flax dispatches and
compiles every initialiser and every op of the forward pass it traces one at a time, seconds of every
JAX training case's set-up. Counted with JAX's own compile events (jax.monitoring)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from quick_compile import QUICK_XLA


@pytest.mark.slow   # its own process (a fresh JAX: every program it compiles is counted), ~3 s
def test_a_jax_models_init_and_optimizer_state_compile_a_few_programs_not_one_per_op():
    code = textwrap.dedent("""
        import os
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax
        from jax import monitoring
        from xpubench import backends
        from xpubench.backends.jax_ import model as jax_model, train
        from xpubench.case import Case
        from xpubench.harness.setup import training_setup
        from xpubench.workloads import get_workload

        case = Case(workload="mnist_cnn", backend="jax", device="cpu", mode="train", batch_size=8, train_samples=64,
                    eval_samples=16)
        setup = training_setup(case)
        model = backends.get("jax").build(get_workload("mnist_cnn"), setup.spec)
        tx = train.make_optimizer(setup.spec, setup.learning_rate)
        jax.block_until_ready(jax.random.split(jax.random.key(0)))   # the key's own programs, before counting
        compiled = []
        monitoring.register_event_duration_secs_listener(
            lambda event, seconds, **kw: compiled.append(event) if event.endswith("backend_compile_duration") else None)
        params, extra = jax_model.init_variables(model, setup.spec, setup.x_train[:1], 0)
        state = train.init_opt_state(tx, params, "fp32")
        jax.block_until_ready((params, state))
        print(len(compiled), len(jax.tree_util.tree_leaves(params)))
    """)
    # the count, not the machine code, is asserted: XLA's optimisation level 0 compiles mnist_cnn's init in 1/4 the time
    environ = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {QUICK_XLA}".strip()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True,
                         env=environ)
    programs, leaves = map(int, out.stdout.split()[-2:])
    assert leaves >= 8 and programs <= 4, (programs, leaves)     # eager: one program per op, dozens
