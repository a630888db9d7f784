"""Multi-process data parallelism, one process per chip: python multi_process.py"""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from utils.torch.models import SeedCNN, images_to_float


def worker(index):  # one process per chip
    device = torch_xla.device()
    torch.manual_seed(0)
    model = SeedCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = TensorDataset(
        torch.randint(0, 256, (4096, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 10, (4096,))
    )
    sampler = DistributedSampler(data, num_replicas=xr.world_size(), rank=xr.global_ordinal())
    for images, labels in pl.MpDeviceLoader(
        DataLoader(data, 128, sampler=sampler, drop_last=True), device
    ):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(images_to_float(images)), labels).backward()
        xm.optimizer_step(optimizer)  # all-reduce of the gradients, then the update
    print(f"process {xr.global_ordinal()} of {xr.world_size()} done")


if __name__ == "__main__":
    torch_xla.launch(worker)
