"""SPMD data parallelism: python spmd_train.py DATA.npz PER_DEVICE_BATCH WEIGHTS_OUT [bf16]"""

import json
import sys

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset, default_collate

from utils.torch.models import SeedCNN
from utils.torch.xla import train_step

xr.use_spmd()  # first: before any tensor touches the device

data_path, per_device_batch, weights_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bf16 = sys.argv[4:] == ["bf16"]
n = xr.global_runtime_device_count()  # every chip on a TPU; CPU_NUM_DEVICES on a CPU
mesh = xs.Mesh(np.arange(n), mesh_shape=(n,), axis_names=("data",))
device = torch_xla.device()

torch.manual_seed(0)
model = SeedCNN().to(device)
for p in model.parameters():
    xs.mark_sharding(p, mesh, (None,) * p.dim())  # replicated: a full copy on every device
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * (per_device_batch * n / 128) ** 0.5)

arrays = np.load(data_path)
images = torch.from_numpy(arrays["x"]).permute(0, 3, 1, 2).contiguous()  # uint8, channels first
labels = torch.from_numpy(arrays["y"].astype(np.int64))
loader = DataLoader(
    TensorDataset(images, labels),
    batch_size=per_device_batch * n,  # the global batch
    drop_last=True,
    collate_fn=lambda rows: dict(zip(("images", "labels"), default_collate(rows), strict=True)),
)
split = {  # cut every batch along its first dimension over the "data" axis
    "images": xs.ShardingSpec(mesh, ("data", None, None, None)),
    "labels": xs.ShardingSpec(mesh, ("data",)),
}
step = torch_xla.compile(train_step, full_graph=True)  # section 2's step, one graph
losses = []
for batch in pl.MpDeviceLoader(loader, device, input_sharding=split):
    # the same step as on one device: the compiler adds the all-reduce of the gradients
    losses.append(step(model, batch["images"], batch["labels"], optimizer, bf16))

torch.save({k: v.cpu() for k, v in model.state_dict().items()}, weights_out)
spec = torch_xla._XLAC._get_xla_sharding_spec  # how a tensor is laid out over the devices
shardings = {"images": spec(batch["images"]), "weight": spec(model.features[0].weight)}
losses = torch.stack(losses).cpu().tolist()  # read once, at the end
print("RESULT " + json.dumps({"devices": n, "shardings": shardings, "losses": losses}))
