"""xpubench's mnist_cnn training throughput against Keras 3 `model.fit` on the same model and batch.

Keras runs the same architecture (Conv 64/2 same -> pool -> dropout .3 -> Conv 32/2 same -> pool ->
dropout .3 -> Dense 256 -> dropout .5 -> Dense 10, Adam 1e-3) on each Keras backend that is installed
(jax, torch), in a fresh process, synthetic data, steady epoch throughput (median of epochs 2..E from a
callback). xpubench's figure is its steady epoch throughput on the same framework. Alternates the two
for --rounds rounds; prints the ratio per framework (target >= 1.3). Needs `pip install keras`.

    python benchmarks/vs_keras.py [--batch 256] [--steps 30] [--rounds 2] [--backends torch,jax]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

KERAS = """
import time, numpy as np, keras
B, S, E = {batch}, {steps}, 3
rng = np.random.default_rng(0)
x = rng.random((B * S, 28, 28, 1), dtype=np.float32); y = rng.integers(0, 10, B * S)
L = keras.layers
model = keras.Sequential([keras.Input((28, 28, 1)),
    L.Conv2D(64, 2, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(0.3),
    L.Conv2D(32, 2, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(0.3),
    L.Flatten(), L.Dense(256, activation="relu"), L.Dropout(0.5), L.Dense(10)])
model.compile(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
class T(keras.callbacks.Callback):
    def on_epoch_begin(self, e, logs=None): self.t = time.perf_counter()
    def on_epoch_end(self, e, logs=None): times.append(time.perf_counter() - self.t)
times = []
model.fit(x, y, batch_size=B, epochs=E, verbose=0, shuffle=True, callbacks=[T()])
print(B * S / float(np.median(times[1:])))
"""


def keras_rate(backend: str, batch: int, steps: int) -> float:
    env = dict(os.environ, KERAS_BACKEND=backend)
    out = subprocess.run([sys.executable, "-c", KERAS.format(batch=batch, steps=steps)], capture_output=True,
                         text=True, env=env, check=False)
    if out.returncode:
        raise SystemExit(f"keras ({backend}) failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    sys.path.insert(0, os.path.dirname(__file__))
    from harness_overhead import xpubench_rate

    from xpubench.backends.fingerprint import detect_environment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", default="torch,jax")
    args = ap.parse_args()
    import importlib.util

    if importlib.util.find_spec("keras") is None:  # not imported here: keras picks its backend at import
        raise SystemExit("this benchmark needs Keras 3: pip install keras")
    env = detect_environment()
    rows = []
    for backend in args.backends.split(","):
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(xpubench_rate(backend, args.batch, args.steps, env))
            theirs.append(keras_rate(backend, args.batch, args.steps))
        ratio = statistics.median(ours) / statistics.median(theirs)
        rows.append({"framework": backend, "xpubench": statistics.median(ours), "keras_fit": statistics.median(theirs),
                     "ratio": ratio})
        print(f"{backend:5} batch {args.batch}: xpubench {rows[-1]['xpubench']:8.0f} samples/s   Keras 3 fit "
              f"({backend} backend) {rows[-1]['keras_fit']:8.0f} samples/s   ratio {ratio:.2f}  "
              f"{'ok' if ratio >= 1.3 else 'BELOW 1.3'}", flush=True)
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
