"""The course's Keras models (imports Keras, and with it TensorFlow: import it only to train).

``seed_cnn`` is the CIFAR-10 network of the course's seed text, layer for layer. The only change
is how the input is declared: the seed passes ``input_shape=(32, 32, 3)`` to the first
``Conv2D``; Keras 3 warns that passing ``input_shape`` to a layer is deprecated and asks for a
``keras.Input`` first. With ``keras.Input`` the model is built at once, so its weights exist
before ``fit`` (we need them: to count parameters, copy initial weights between strategies, and
build it inside ``strategy.scope()`` so the variables are created on the right devices).
"""

from __future__ import annotations

import keras


def seed_cnn(
    num_classes: int = 10, *, name: str = "seed_cnn", dtype: str | None = None
) -> keras.Sequential:
    """The seed's CNN: 3 conv layers (32, 64, 64 filters, 3x3, ReLU), 2 max-pools, Dense 64, logits.

    The last layer has no activation: the loss is
    ``SparseCategoricalCrossentropy(from_logits=True)`` as in the seed. Under a ``mixed_bfloat16``
    policy the layers compute in bfloat16 and the logits come out bfloat16; Keras 3 losses cast
    them to float32 before the softmax, so no extra layer is needed. ``dtype``: every layer's
    dtype policy (``"mixed_bfloat16"``), whatever the global policy; ``None`` follows it.
    """
    kw = {} if dtype is None else {"dtype": dtype}
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            layers.Conv2D(32, (3, 3), activation="relu", **kw),
            layers.MaxPooling2D((2, 2), **kw),
            layers.Conv2D(64, (3, 3), activation="relu", **kw),
            layers.MaxPooling2D((2, 2), **kw),
            layers.Conv2D(64, (3, 3), activation="relu", **kw),
            layers.Flatten(**kw),
            layers.Dense(64, activation="relu", **kw),
            layers.Dense(num_classes, **kw),
        ],
        name=name,
    )


def mlp(inputs: int, hidden: int = 64, num_classes: int = 10) -> keras.Sequential:
    """Notebook 08's small model (flat images -> Dense ``hidden``, ReLU -> logits), the same in
    its Keras-on-JAX and its TensorFlow multi-worker programs; seed before building it."""
    return keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(num_classes),
        ]
    )
