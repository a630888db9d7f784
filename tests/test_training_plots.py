"""Tests for utils.training_plots: titles say what the model saw; the confusion matrix counts."""

from __future__ import annotations

import matplotlib
import numpy as np

matplotlib.use("Agg")

from utils import training_plots  # noqa: E402


def test_confusion_matrix_counts_true_by_predicted():
    cm = training_plots.confusion_matrix(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2]), 3)
    assert cm.tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]


def test_plots_carry_the_title_they_are_given():
    names = [f"c{i}" for i in range(3)]
    images = np.zeros((4, 8, 8, 3), np.uint8)
    fig = training_plots.plot_predictions(
        images,
        np.array([0, 1, 2, 0]),
        np.array([0, 1, 1, 0]),
        names,
        rows=1,
        cols=4,
        title="STAND-IN data",
    )
    assert fig._suptitle.get_text() == "STAND-IN data"
    cm = training_plots.confusion_matrix(np.array([0, 1]), np.array([0, 1]), 3)
    fig = training_plots.plot_confusion(cm, names, title="STAND-IN data: confusion")
    assert fig.axes[0].get_title() == "STAND-IN data: confusion"
