"""A checkpoint round trip through file objects: save model + optimizer into an io.BytesIO and
an open file, load them into fresh objects, keep training; also a whole model saved and loaded
back with weights_only=False (torch 2.6+ rules)."""
import io
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def fresh():
    model = Net()
    with torch.no_grad():
        rng = np.random.default_rng(0)
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def train(model, optimizer, x, y, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((128, 8)).astype(np.float32))
    y = torch.from_numpy(np.sin(x.numpy().sum(1, keepdims=True)).astype(np.float32))

    model, optimizer = fresh()
    train(model, optimizer, x, y, 30)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 30}, buffer)
    buffer.seek(0)
    ckpt = torch.load(buffer, map_location="cpu", weights_only=True)
    model2, optimizer2 = fresh()
    model2.load_state_dict(ckpt["model"])
    optimizer2.load_state_dict(ckpt["optimizer"])
    assert ckpt["step"] == 30

    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    with open(path, "wb") as f:
        torch.save({"model": model2.state_dict(), "optimizer": optimizer2.state_dict()}, f)
    with open(path, "rb") as f:
        ckpt = torch.load(f)
    model3, optimizer3 = fresh()
    model3.load_state_dict(ckpt["model"])
    optimizer3.load_state_dict(ckpt["optimizer"])

    whole = io.BytesIO()
    torch.save(model3, whole)
    whole.seek(0)
    try:
        torch.load(whole)  # weights_only=True by default: a whole module is refused
        print("ERROR: a whole module loaded with weights_only=True")
        sys.exit(1)
    except Exception as exc:
        print(f"refused as expected: {type(exc).__name__}")
    whole.seek(0)
    model4 = torch.load(whole, weights_only=False)
    assert isinstance(model4, Net)
    with torch.no_grad():
        assert torch.allclose(model4(x), model3(x)), "the whole-model copy computes differently"

    resumed = train(model3, optimizer3, x, y, 30)
    straight_model, straight_opt = fresh()
    straight = train(straight_model, straight_opt, x, y, 60)
    print(f"resumed {resumed:.6f} straight {straight:.6f}")
    assert abs(resumed - straight) < 1e-5, "resuming from the checkpoint changed the training"
    print(f"FINAL_LOSS {resumed:.6f}")


if __name__ == "__main__":
    main()
