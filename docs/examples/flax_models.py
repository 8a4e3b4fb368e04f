"""Example user model for `xpubench run --model docs/examples/flax_models.py:mlp` (flax linen)."""

import flax.linen as nn


class MLP(nn.Module):
    """Flattened 28x28 images -> 2 hidden layers with dropout -> 10 logits. `train` switches dropout on."""

    hidden: int = 256

    @nn.compact
    def __call__(self, x, train: bool = False):
        x = x.reshape(x.shape[0], -1)
        for _ in range(2):
            x = nn.Dropout(0.1, deterministic=not train)(nn.relu(nn.Dense(self.hidden)(x)))
        return nn.Dense(10)(x)


def mlp():
    return {"model": MLP(), "input_shape": "28,28,1", "input_dtype": "float32", "task": "classes:10"}
