"""The program ``pt2x verify``'s tests convert and plant faults in (``planted_faults``), for each
target: two convolutions, a residual add and a linear head, under named modules (conv1, conv2,
head), small enough to export and run in seconds."""

from __future__ import annotations

import torch

__all__ = ["Block"]


class Block(torch.nn.Module):
    """Two convolutions under named modules, a residual that skips the second, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 3, 3, padding=1)
        self.head = torch.nn.Linear(3, 5)

    def forward(self, x):
        h = torch.relu(self.conv1(x))
        y = self.conv2(h) + x * 0.5
        return self.head(y.mean(dim=(2, 3)))
