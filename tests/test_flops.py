"""Tests for utils.flops: FLOP and byte counts of known layers and of the seed's CNN."""

from __future__ import annotations

import pytest

from utils import flops


def test_seed_first_conv() -> None:
    # 32x32x3 -> 3x3 valid conv with 32 filters: 30x30x32 outputs, each 3*3*3 = 27 MACs.
    c = flops.conv2d_cost((32, 32, 3), 32, 3, bias=False)
    assert c.output_shape == (1, 30, 30, 32)
    assert c.flops == 2 * 30 * 30 * 32 * 27
    assert c.matmul == (900, 27, 32)
    assert c.bytes == 4 * (32 * 32 * 3 + 27 * 32 + 30 * 30 * 32)
    with_bias = flops.conv2d_cost((32, 32, 3), 32, 3, batch=2)
    assert with_bias.flops == 2 * (c.flops + 30 * 30 * 32)


def test_conv_same_padding_stride_and_errors() -> None:
    c = flops.conv2d_cost((32, 32, 16), 8, (3, 3), stride=2, padding="same", bias=False)
    assert c.output_shape == (1, 16, 16, 8)
    assert c.flops == 2 * 16 * 16 * 8 * 9 * 16
    with pytest.raises(ValueError):
        flops.conv2d_cost((8, 8, 1), 1, 3, padding="full")


def test_dense_pool_elementwise() -> None:
    d = flops.dense_cost(1024, 64, batch=8, bias=False, dtype_bytes=2)
    assert d.flops == 2 * 8 * 1024 * 64
    assert d.bytes == 2 * (8 * 1024 + 1024 * 64 + 8 * 64)
    assert d.matmul == (8, 1024, 64)
    assert d.intensity == pytest.approx(d.flops / d.bytes)
    p = flops.maxpool2d_cost((30, 30, 32), 2)
    assert p.output_shape == (1, 15, 15, 32) and p.flops == 15 * 15 * 32 * 3
    e = flops.elementwise_cost(1000, inputs=2)
    assert e.flops == 1000 and e.bytes == 12000 and e.intensity == pytest.approx(1 / 12)


def test_seed_cnn_layers_chain() -> None:
    layers = flops.seed_cnn_costs(batch=4)
    assert [c.name for c in layers] == [
        "conv1",
        "pool1",
        "conv2",
        "pool2",
        "conv3",
        "dense1",
        "dense2",
    ]
    shapes = [c.output_shape for c in layers]
    assert shapes == [
        (4, 30, 30, 32),
        (4, 15, 15, 32),
        (4, 13, 13, 64),
        (4, 6, 6, 64),
        (4, 4, 4, 64),
        (4, 64),
        (4, 10),
    ]
    assert layers[2].matmul == (4 * 13 * 13, 3 * 3 * 32, 64)
    assert layers[5].matmul == (4, 1024, 64)
    # Keras counts 122,570 parameters for this model; the weights in the byte counts agree.
    params = (
        3 * 3 * 3 * 32
        + 32
        + 3 * 3 * 32 * 64
        + 64
        + 3 * 3 * 64 * 64
        + 64
        + 1024 * 64
        + 64
        + 64 * 10
        + 10
    )
    assert params == 122_570
    one = flops.seed_cnn_costs(batch=1)
    assert all(b.flops == 4 * a.flops for a, b in zip(one, layers, strict=True))


def test_valid_padding_with_a_stride() -> None:
    # (32 - 3) // 2 + 1 = 15 outputs per side; 'same' gives ceil(32 / 2) = 16
    valid = flops.conv2d_cost((32, 32, 3), 8, 3, stride=2, padding="valid")
    assert valid.output_shape == (1, 15, 15, 8)
    assert valid.matmul == (15 * 15, 27, 8)
    assert flops.conv2d_cost((7, 7, 1), 1, 3, stride=1).output_shape == (1, 5, 5, 1)
    assert flops.conv2d_cost((8, 8, 1), 1, 2, stride=2).output_shape == (1, 4, 4, 1)


def test_seed_cnn_costs_at_other_widths() -> None:
    wide = flops.seed_cnn_costs(2, channels=(128, 128, 128), dense=128)
    assert [c.output_shape for c in wide if c.name.startswith("conv")] == [
        (2, 30, 30, 128),
        (2, 13, 13, 128),
        (2, 4, 4, 128),
    ]
    assert wide[-2].matmul == (2, 4 * 4 * 128, 128)
