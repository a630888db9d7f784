"""Tests for utils.keras.models: the seed's CNN, layer for layer."""

from __future__ import annotations

import keras
import numpy as np

from utils.keras import models


def test_seed_cnn_matches_the_seed():
    model = models.seed_cnn()
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds == [
        "Conv2D",
        "MaxPooling2D",
        "Conv2D",
        "MaxPooling2D",
        "Conv2D",
        "Flatten",
        "Dense",
        "Dense",
    ]
    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [c.filters for c in convs] == [32, 64, 64]
    assert all(c.kernel_size == (3, 3) and c.activation.__name__ == "relu" for c in convs)
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert [d.units for d in dense] == [64, 10]
    assert dense[-1].activation.__name__ == "linear"  # logits, from_logits=True in the loss
    # 896 + 18,496 + 36,928 + 65,600 + 650, as the seed's model.summary() reports.
    assert model.count_params() == 122_570
    out = model(np.zeros((2, 32, 32, 3), np.float32))
    assert tuple(out.shape) == (2, 10)


def test_seed_cnn_num_classes_and_bf16_policy():
    assert models.seed_cnn(num_classes=3).output_shape == (None, 3)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = models.seed_cnn()
        assert model.layers[0].compute_dtype == "bfloat16"
        assert model.layers[0].kernel.dtype == "float32"  # variables stay float32
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_seed_cnn_takes_a_policy_per_model_whatever_the_global_one():
    """``dtype=``: one seed CNN for 09's ladder, whose rungs differ in policy side by side."""
    assert keras.mixed_precision.global_policy().name == "float32"
    model = models.seed_cnn(dtype="mixed_bfloat16")
    assert {layer.dtype_policy.name for layer in model.layers} == {"mixed_bfloat16"}
    assert model.layers[0].compute_dtype == "bfloat16" and model.layers[0].kernel.dtype == "float32"
    assert model.count_params() == 122_570
    assert {layer.dtype_policy.name for layer in models.seed_cnn().layers} == {"float32"}
