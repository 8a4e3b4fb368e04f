"""A process other than 0 of a run over several processes (launch/launchers/): it plans nothing and
writes nothing. It starts the worker of each case process 0 tells it to, as process 0 starts its own, so
the two join one group (one ``jax.distributed`` cluster, one torch process group); every step is
synchronised, so what it measures is process 0's too, and process 0 records the case.
"""

from __future__ import annotations

from xpubench.case import Case
from xpubench.launch.launchers import Launcher
from xpubench.launch.supervise import run_one


def follow(launcher: Launcher) -> dict:
    """Every worker process 0 orders, in its order (``launcher`` is the running one: launchers.running);
    returns process 0's last word (``{"code", "error"}``)."""
    for order in launcher.orders():
        run_one(Case.from_dict(order["case"]), timeout_s=float(order["timeout_s"]),
                memory_limit_bytes=order.get("memory_limit_bytes"), process=int(order["process"]))
    return launcher.ending
