"""python cached_step.py CACHE_DIR: three compiled training steps, with the persistent cache on."""

import json
import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

from utils.torch.models import SeedCNN, images_to_float

xr.initialize_cache(sys.argv[1])  # before the first computation
device = torch_xla.device()
torch.manual_seed(0)
model = SeedCNN().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.zeros(64, 3, 32, 32, dtype=torch.uint8, device=device)
labels = torch.zeros(64, dtype=torch.int64, device=device)


@torch_xla.compile(full_graph=True)
def train_step():
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images_to_float(images)), labels)
    loss.backward()
    optimizer.step()


for _ in range(3):
    train_step()
xm.wait_device_ops()
count, compile_ns, _ = met.metric_data("CompileTime")
counters = ("PersistentCacheHit", "PersistentCacheMiss", "PersistentCacheDeserializeFailure")
cache = {name: int(met.counter_value(name) or 0) for name in counters}
print("RESULT " + json.dumps({"compiles": count, "compile_s": compile_ns / 1e9, **cache}))
