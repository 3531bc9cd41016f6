# SPDX-License-Identifier: Apache-2.0
"""An image classifier's training loop in PyTorch on podfeed (docs/recipes.md).

    torch_images.py DATA CKPT [--stop-after N]

Trains a tiny CNN on DATA's images (224x224 train crops and flips decoded
on the loader's threads, the global shuffle, everything else the
defaults), saving a checkpoint (the model's, the optimizer's and the
data's state_dict) in CKPT every 10 steps and at the end; with
--stop-after N it stops after step N as a preempted job would.  Run again,
it resumes from CKPT where it was saved, the data bit for bit."""
import argparse
import os

import torch

import podfeed
import podfeed.torch

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("ckpt")
ap.add_argument("--stop-after", type=int)
args = ap.parse_args()

features = {"image/encoded": podfeed.Image(224, 224, augment="train"),
            "image/class/label": "int64"}
# One host, one device: the loader hands it [1, 16, 224, 224, 3] uint8
# batches; the global shuffle draws every step from the whole dataset.
data = podfeed.torch.IterableDataset(args.data, features, per_core_batch=16, cores=1,
                                     shuffle="global", seed=1, epochs=2)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 5, stride=4), torch.nn.ReLU(),
    torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 1001))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
step = 0

if os.path.exists(args.ckpt):
    ckpt = torch.load(args.ckpt)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    data.load_state_dict(ckpt["data"])   # the next iteration starts there
    step = ckpt["step"]
    print(f"resumed at step {step} (epoch {ckpt['data']['epoch']})")


def save():
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "data": data.state_dict(), "step": step}, args.ckpt)


# batch_size=None: the loader makes the batches; num_workers=0: its own
# threads read and decode, without the GIL.
for batch in torch.utils.data.DataLoader(data, batch_size=None, num_workers=0):
    x = batch["image/encoded"][0].permute(0, 3, 1, 2).float().div_(255)  # [16, 3, 224, 224]
    y = batch["image/class/label"][0, :, 0]                              # [16]
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    if step % 10 == 0 or step == args.stop_after:
        save()
        print(f"step {step}: loss {loss.item():.3f}, checkpoint saved")
    if step == args.stop_after:
        break
else:
    save()
    print(f"done: {step} steps")
