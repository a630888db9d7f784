"""Stored notebook outputs must be the same on any machine of the kind (issue 12, part 1).

``pytest --nbval`` compares every stored output except those of cells marked
``# NBVAL_IGNORE_OUTPUT`` / ``# NBVAL_SKIP`` (or tagged ``nbval-ignore-output`` / ``nbval-skip``).
A compared output that names *this* machine's CPU model or its CPU feature flags (AVX-512, AMX,
AVX-VNNI) passes here and fails on the next machine with another CPU, so this test fails first,
on any machine: it reads ``/proc/cpuinfo`` and looks for those words in the compared outputs.
It also rejects C++ log noise that must never be stored (``cuInit``, the oneDNN banner), in any
output, compared or not. Framework-free; reads the notebooks as JSON.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# Feature flags whose presence differs between CPUs of the same machine kind (seen: one
# machine reports amx_bf16, the next only avx512_bf16).
FLAG_PATTERN = re.compile(r"^(avx512\w*|amx\w*|avx_vnni\w*)$")
# Flags known to differ between the machines CI has run on, checked on every machine too, so a
# compared output made on an AMX machine fails here even when this CPU lacks AMX.
KNOWN_VARIABLE_FLAGS = frozenset(
    {"amx_bf16", "amx_int8", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni"}
)
NOISE = ("cuInit", "oneDNN custom operations", "absl::InitializeLog")
# An absolute path differs between a checkout here, in CI and on Colab (/content, /kaggle).
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|content|kaggle|check)/[\w.-]")
# A measured rate (a compare table, images/s, GB/s) differs from run to run.
RATE = re.compile(
    r"rate /s|\d\s?(?:images|img|samples|steps|tokens)/s\b|\d\s?(?:GB|MB|GiB|MiB)/s\b"
)
IGNORE_MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip"}


def cpu_words(cpuinfo: str) -> tuple[str | None, set[str]]:
    """This machine's CPU model name and its variable feature flags, from ``/proc/cpuinfo``."""
    model, flags = None, set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and model is None and value:
            model = value
        elif key in ("flags", "Features") and not flags:
            flags = {f for f in value.split() if FLAG_PATTERN.match(f)}
    return model, flags


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def is_compared(cell: dict) -> bool:
    """Whether nbval compares this code cell's outputs."""
    # nbval honours a marker on any comment line of the cell (e.g. after a "# @title" line).
    comments = [
        line.strip().lstrip("#").strip()
        for line in _text(cell.get("source")).splitlines()
        if line.strip().startswith("#")
    ]
    if any(comment in IGNORE_MARKERS for comment in comments):
        return False
    tags = set(cell.get("metadata", {}).get("tags", []))
    return not (tags & IGNORE_TAGS)


def output_texts(cell: dict) -> list[str]:
    """Every text an output of the cell holds: streams, text results, error messages."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(_text(out["text"]))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                texts.append(_text(value))
        if out.get("output_type") == "error":
            texts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return texts


def machine_words_in(nb: dict, model: str | None, flags: set[str]) -> list[str]:
    """Problems: compared outputs with the CPU model, a variable feature flag, a local path or a
    measured rate."""
    problems = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code" or not is_compared(cell):
            continue
        for text in output_texts(cell):
            if model and model in text:
                problems.append(f"cell {i}: CPU model {model!r} in a compared output")
            found = sorted(f for f in flags if re.search(rf"\b{re.escape(f)}\b", text))
            if found:
                problems.append(f"cell {i}: CPU feature flags {found} in a compared output")
            if MACHINE_PATH.search(text):
                problems.append(f"cell {i}: a path of this machine in a compared output")
            if RATE.search(text):
                problems.append(f"cell {i}: a measured rate in a compared output")
    return problems


def noise_in(nb: dict) -> list[str]:
    """Problems: any stored output with C++ log noise."""
    problems = []
    for i, cell in enumerate(nb.get("cells", [])):
        for text in output_texts(cell):
            problems += [f"cell {i}: {word!r} in a stored output" for word in NOISE if word in text]
    return problems


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_compared_outputs_do_not_name_this_machines_cpu(path):
    model, flags = cpu_words(_read_cpuinfo())
    problems = machine_words_in(json.loads(path.read_text()), model, flags | KNOWN_VARIABLE_FLAGS)
    assert not problems, (
        f"{path.name}: outputs that differ between machines are compared by nbval; tag those cells "
        "'nbval-ignore-output' or print something machine-independent:\n  " + "\n  ".join(problems)
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_cpp_log_noise_is_stored(path):
    problems = noise_in(json.loads(path.read_text()))
    assert not problems, (
        f"{path.name}: C++ log lines stored as output; silence them at the source:\n  "
        + "\n  ".join(problems)
    )


# --------------------------------------------------------------------------- the checker itself

CPUINFO = """processor\t: 0
model name\t: Example(R) CPU 9000
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512_bf16 amx_tile amx_bf16 avx_vnni fma

processor\t: 1
model name\t: Example(R) CPU 9000
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512_bf16 amx_tile amx_bf16 avx_vnni fma
"""


def _nb(source: str, text: str, tags: tuple[str, ...] = ()) -> dict:
    cell = {
        "cell_type": "code",
        "metadata": {"tags": list(tags)},
        "source": source.splitlines(keepends=True),
        "outputs": [{"output_type": "stream", "name": "stdout", "text": [text]}],
    }
    return {"cells": [cell]}


def test_cpu_words_reads_model_and_variable_flags_only():
    model, flags = cpu_words(CPUINFO)
    assert model == "Example(R) CPU 9000"
    assert flags == {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "avx_vnni"}


def test_checker_flags_compared_outputs_and_spares_ignored_ones():
    model, flags = cpu_words(CPUINFO)
    bad = _nb("print(features)", "CPU bf16 instructions: ['amx_bf16', 'avx512_bf16']\n")
    assert len(machine_words_in(bad, model, flags)) == 1
    named = _nb("print(model)", "CPU: Example(R) CPU 9000\n")
    assert machine_words_in(named, model, flags)
    ignored = _nb("# NBVAL_IGNORE_OUTPUT\nprint(features)", "amx_bf16 avx512_bf16\n")
    assert machine_words_in(ignored, model, flags) == []
    titled = _nb("# @title Check: x\n# NBVAL_IGNORE_OUTPUT\nprint(f)", "amx_bf16\n")
    assert machine_words_in(titled, model, flags) == []
    tagged = _nb("print(features)", "amx_bf16\n", tags=("nbval-skip",))
    assert machine_words_in(tagged, model, flags) == []
    where = _nb("results.record(x)", "PosixPath('/work/main/build/results/03.json')\n")
    assert machine_words_in(where, model, flags) == [
        "cell 0: a path of this machine in a compared output"
    ]
    assert (
        machine_words_in(_nb("print(u)", "see https://x.org/work/y and ./tmp/z\n"), model, flags)
        == []
    )
    table = _nb("print(speed.table())", "variant  rate /s\nfloat32  374\n")
    assert machine_words_in(table, model, flags) == ["cell 0: a measured rate in a compared output"]
    assert machine_words_in(_nb("print(r)", "Grain: 1,234 images/s\n"), model, flags)
    # A flag name as part of a longer word is not a match; "avx2" is common to all, not checked.
    fine = _nb("print(x)", "avx512_bf16_like_name avx2 fma\n")
    assert machine_words_in(fine, model, flags) == []


def test_noise_is_found_even_in_ignored_cells():
    nb = _nb(
        "# NBVAL_IGNORE_OUTPUT\nimport tensorflow",
        "E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n",
    )
    assert noise_in(nb) == ["cell 0: 'cuInit' in a stored output"]
    banner = _nb("x = 1", "port.cc:153] oneDNN custom operations are on.\n")
    assert len(noise_in(banner)) == 1
