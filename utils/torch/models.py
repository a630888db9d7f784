"""The seed's CIFAR-10 CNN in PyTorch (imports torch, not torch_xla).

The same layers as the Keras model in :mod:`utils.keras.models` (the seed's ``Sequential``):
Conv 32 3x3 ReLU, MaxPool 2, Conv 64 3x3 ReLU, MaxPool 2, Conv 64 3x3 ReLU, Flatten,
Linear 64 ReLU, Linear 10 (logits). 122,570 parameters, like the Keras one. PyTorch puts
channels first, so the model takes ``(batch, 3, 32, 32)`` float images.

Plain PyTorch on purpose: the same module runs eagerly on the CPU and, moved with
``model.to(torch_xla.device())``, lazily on an XLA device. That is how notebook 06 compares them.
"""

from __future__ import annotations

import torch
from torch import nn


class SeedCNN(nn.Module):
    """The seed's CNN for 32x32 RGB images; returns logits of shape ``(batch, num_classes)``."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3),  # 32x32 -> 30x30
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> 15x15
            nn.Conv2d(32, 64, kernel_size=3),  # -> 13x13
            nn.ReLU(),
            nn.MaxPool2d(2),  # -> 6x6
            nn.Conv2d(64, 64, kernel_size=3),  # -> 4x4
            nn.ReLU(),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of ``(B, 3, 32, 32)`` float images."""
        return self.classifier(self.features(x))


def images_to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 ``(B, 3, H, W)`` images -> float32 in [0, 1], on whatever device they are.

    Shipping uint8 to the device and converting there moves 4x fewer bytes than float32, and on
    an XLA device the conversion becomes part of the compiled training step.
    """
    return images.to(torch.float32) / 255.0
