"""A small model in the shape of programs that register their own operators and batch ragged
inputs: an activation written as a ``torch.library.custom_op`` with ``register_fake`` and
``register_autograd`` and called through ``torch.ops.<ns>``, a CSR adjacency
(``to_sparse_csr`` + ``torch.sparse.mm``) mixing node features, and variable-length sequences
held in a ``torch.nested.nested_tensor`` and padded with ``to_padded_tensor``.

Weights and data come from NumPy, so torch and TensorBrain must reach the same loss.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


@torch.library.custom_op("ragged::softclip", mutates_args=())
def softclip(x: Tensor, scale: float) -> Tensor:
    return torch.tanh(x / scale) * scale


@softclip.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.scale = inputs[1]


def _backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return grad * (1 - (y / ctx.scale) ** 2), None


softclip.register_autograd(_backward, setup_context=_setup)


class Net(nn.Module):
    def __init__(self, rng, n_feat=8, hidden=16, n_class=3):
        super().__init__()
        self.enc = nn.Linear(n_feat, hidden)
        self.mix = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, n_class)
        with torch.no_grad():
            for lin in (self.enc, self.mix, self.out):
                lin.weight.copy_(torch.tensor(rng.standard_normal(tuple(lin.weight.shape)) * 0.3,
                                              dtype=torch.float32))
                lin.bias.zero_()

    def forward(self, seqs, adj):
        padded = seqs.to_padded_tensor(0.0)                   # (nodes, longest, feat)
        lengths = torch.tensor([s.shape[0] for s in seqs.unbind()], dtype=torch.float32)
        pooled = padded.sum(1) / lengths[:, None]             # mean over each node's own steps
        h = torch.ops.ragged.softclip(self.enc(pooled), 2.0)
        h = softclip(self.mix(torch.sparse.mm(adj, h)), 2.0)
        return self.out(h)


def main():
    rng = np.random.default_rng(7)
    n = 12
    seqs = torch.nested.nested_tensor(
        [torch.tensor(rng.standard_normal((int(rng.integers(2, 6)), 8)), dtype=torch.float32)
         for _ in range(n)])
    dense = (rng.random((n, n)) < 0.25).astype(np.float32) + np.eye(n, dtype=np.float32)
    adj = torch.tensor(dense / dense.sum(1, keepdims=True)).to_sparse_csr()
    labels = torch.tensor(rng.integers(0, 3, n))
    model = Net(rng)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    for step in range(30):
        opt.zero_grad()
        loss = F.cross_entropy(model(seqs, adj), labels)
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f}")
    print(f"FINAL_LOSS {loss.item():.6f}")


if __name__ == "__main__":
    main()
