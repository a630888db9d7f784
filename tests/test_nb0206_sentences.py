"""Sentences of notebooks 03, 04 and 06 that a reader found contradicted stay fixed.

Framework-free: reads the stored notebooks as JSON. Each row: a notebook, a phrase its markdown
must not hold again (the contradicted sentence; None: a sentence was missing), and what one
markdown cell now says together (the claim with the condition or caveat that makes it true for
every result).
"""

from __future__ import annotations

import pytest

from tests.nbcells import NOTEBOOKS, cells, text

NB = {n: next(NOTEBOOKS.glob(f"{n}_*.ipynb")) for n in ("03", "04", "06")}

ROWS = [
    # 03: the free TPUs' TensorFlow trains on the host CPU; the private cache size is no advice;
    # the timing's wait is explained where it is used.
    ("03", "trains the seed's CNN with TensorFlow's `TPUStrategy`", ("`TPUStrategy`", "host CPU")),
    ("03", "with `jax_log_compiles` or `_cache_size()`", ("`_cache_size()`", "private")),
    ("03", None, ("JAX dispatches asynchronously", "jax.block_until_ready")),
    # 04: the step's gain against the matmul's is printed by the code that measured both; the
    # fit logs are not a comparison; steps_per_execution on a TPU, with Keras on JAX's caveat.
    ("04", "Expect a training step to gain less", ("need not gain", "the last line above")),
    ("04", "so expect `steps_per_execution`", ("matter more there", "Keras on JAX")),
    ("04", None, ("fit logs of sections 2 and 3", "interleaved rounds do")),
    # 06: the read inside full_graph runs before the call raises; SPMD's agreement is a CPU's;
    # the CPU's bf16 table carries no advice; the 403 is the 2.0 wheel's.
    ("06", "is refused with an error", ("still compiles and", "then the call raises")),
    ("06", "The weights agree within 1e-3", ("On a CPU the check holds", "On a TPU")),
    ("06", "set `BF16` accordingly", ("the table is the CPU's", "says nothing about a")),
    ("06", "its URLs answer 403", ("torch_xla 2.0's, answers 403", "colabtools#4769")),
    ("06", "step 1's graph differs from the rest", ("creates Adam's state", "read of the losses")),
]


@pytest.mark.parametrize(
    ("nb", "gone", "now"), ROWS, ids=[f"{r[0]}: {r[1] or r[2][0]}" for r in ROWS]
)
def test_the_sentence_is_fixed(nb: str, gone: str | None, now: tuple[str, ...]) -> None:
    prose = [" ".join(text(c).split()) for c in cells(NB[nb]) if c["cell_type"] == "markdown"]
    assert gone is None or not any(gone in p for p in prose), gone
    assert any(all(" ".join(phrase.split()) in p for phrase in now) for p in prose), now


def test_06_says_which_device_its_batch_is_for() -> None:
    """Section 2 trains on one device: the batch is not called 'per device' unqualified."""
    source = "".join(text(c) for c in cells(NB["06"]) if c["cell_type"] == "code")
    assert "per device, {epochs} epochs" not in source
    assert "(sections 2 and 6 on one device, section 5 on each of its devices)" in source
