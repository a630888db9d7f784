"""Plots of a training run: curves, a prediction grid and a confusion matrix (matplotlib, numpy).

Framework-free: pass ``history.history`` dicts and numpy arrays, so the PyTorch notebooks can use
these too. Each function returns the matplotlib ``Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def plot_history(history: Mapping[str, Sequence[float]], *, title: str = "") -> Figure:
    """Training/validation accuracy and loss per epoch from a Keras ``History.history`` dict."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, key in zip(axes, ("accuracy", "loss"), strict=True):
        for name, style in ((key, "o-"), (f"val_{key}", "s--")):
            if name in history:
                values = list(history[name])
                ax.plot(range(1, len(values) + 1), values, style, label=name)
        ax.set_xlabel("epoch")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_predictions(
    images: np.ndarray,
    labels: np.ndarray,
    predictions: np.ndarray,
    class_names: Sequence[str],
    *,
    rows: int = 3,
    cols: int = 8,
    title: str = "",
) -> Figure:
    """Images titled with the predicted class; wrong ones in red, the true class in brackets.

    ``title``: the figure's title; say what the model was trained on (e.g. "STAND-IN data").
    """
    fig, axes = plt.subplots(rows, cols, figsize=(1.6 * cols, 1.8 * rows))
    for i, ax in enumerate(np.ravel(axes)):
        ax.axis("off")
        if i >= len(images):
            continue
        ax.imshow(images[i])
        ok = int(predictions[i]) == int(labels[i])
        text = class_names[int(predictions[i])]
        if not ok:
            text += f"\n({class_names[int(labels[i])]})"
        ax.set_title(text, fontsize=8, color="black" if ok else "red")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
    """Counts ``cm[true, predicted]`` as an int64 ``(num_classes, num_classes)`` array."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(labels, int), np.asarray(predictions, int)), 1)
    return cm


def plot_confusion(cm: np.ndarray, class_names: Sequence[str], *, title: str = "") -> Figure:
    """The confusion matrix as an image, rows = true class, columns = predicted, with counts.

    ``title``: the axes' title; say what the model was trained on (e.g. "STAND-IN data").
    """
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    im = ax.imshow(cm, cmap="Blues")
    ticks = np.arange(len(class_names))
    ax.set_xticks(ticks, class_names, rotation=45, ha="right")
    ax.set_yticks(ticks, class_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    threshold = cm.max() / 2 if cm.size else 0
    for (i, j), v in np.ndenumerate(cm):
        ax.text(
            j,
            i,
            str(v),
            ha="center",
            va="center",
            fontsize=7,
            color="white" if v > threshold else "black",
        )
    fig.colorbar(im, ax=ax, fraction=0.046)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
