"""``%%save_script NAME``: write a notebook cell to a script in this run's own folder, quietly.

Notebooks 04, 06 and 07 show a recipe as a visible, editable cell and then run it as a script in
a fresh Python process. ``%%writefile`` would do the writing but prints ``Writing /tmp/...``: a
machine path in the stored output. This magic writes the same file and prints nothing; the folder
is the run's own (a new temporary one unless given), so two runs side by side never share a script.
In a runtime of your own, ``%%writefile NAME`` does the same job.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from IPython import get_ipython

__all__ = ["register_save_script"]


def register_save_script(folder: Path | str | None = None, *, prefix: str = "course_") -> Path:
    """Register ``%%save_script NAME`` in the running kernel; return the folder it writes to.

    ``NAME`` is a plain file name (no folder part): the script lands in ``folder``, which is created
    if needed (a new temporary folder named ``prefix...`` when ``folder`` is None).
    """
    target = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix=prefix))
    target.mkdir(parents=True, exist_ok=True)

    def save_script(line: str, cell: str) -> None:
        name = line.strip()
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(
                "%%save_script needs a plain file name, such as `%%save_script train.py`; "
                f"got {line!r} "
                f"(scripts go to {target.name}/, this run's own folder)"
            )
        (target / name).write_text(cell)

    shell = get_ipython()
    if shell is None:
        raise RuntimeError(
            "%%save_script is a cell magic: call register_save_script() in a Jupyter kernel"
        )
    shell.register_magic_function(save_script, magic_kind="cell", magic_name="save_script")
    return target
