"""The training-step workloads of ``train.py --workload``, written once for both frameworks.

Each builder takes ``lib`` (``tensorbrain`` or ``torch``) and returns a model built from that
library's ``nn``: one source text, two frameworks, so the comparison is the same model line for
line. ResNet-18 is the exception: TensorBrain's side is
``tb.models.resnet18``; the torch side is :func:`resnet18` here (torchvision's structure, which
this machine does not have), and takes tb's weights through the state dict (the keys are
torchvision's on both sides).

A workload names the ``tb.nn`` layers it needs; when one is missing (a layer not written
yet), train.py prints "skipped: tb.nn has no X yet" for it instead of failing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Workload:
    name: str
    title: str
    needs: tuple          # tb.nn attribute names the model uses
    build: object         # build(lib) -> model
    data: object          # data(rng) -> (x, y) NumPy arrays
    loss: str = "cross_entropy"    # or "mse"
    optimizer: str = "sgd"         # "sgd" (momentum 0.9) or "adam" (DCGAN's betas)
    lr: float = 0.01
    clip: float | None = None      # clip_grad_norm_ max norm (the LSTM LM's 0.25)
    extra: dict = field(default_factory=dict)


# ***** 3-block conv net, B=32, 3x32x32 *****
def convnet(lib):
    nn = lib.nn

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(2)]
    return nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), nn.Flatten(),
                         nn.Linear(128 * 4 * 4, 10))


# ***** ResNet-18 (torchvision's structure) for torch *****
def resnet18(lib, num_classes=10):
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            planes = [64, 128, 256, 512]
            inp = 64
            for i, p in enumerate(planes):
                stride = 1 if i == 0 else 2
                setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(inp, p, stride),
                                                             BasicBlock(p, p)))
                inp = p
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))
    return ResNet()


def tb_or_torch_resnet18(lib):
    if lib.__name__ == "tensorbrain":
        return lib.models.resnet18(num_classes=10)
    return resnet18(lib)


# ***** DCGAN generator: 4 ConvTranspose2d + BatchNorm, B=16, 100 -> 3x32x32 *****
def dcgan_generator(lib, nz=100, ngf=64):
    nn = lib.nn
    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


# ***** 2-layer LSTM language model: hidden 200, seq 35, B=20, 1000 words *****
def lstm_lm(lib, ntoken=1000, nhid=200, nlayers=2):
    nn = lib.nn

    class RNNModel(nn.Module):    # pytorch/examples word_language_model, without dropout
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(ntoken, nhid)
            self.rnn = nn.LSTM(nhid, nhid, nlayers)
            self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, x):     # x: (seq, batch) token ids
            out, _ = self.rnn(self.encoder(x))
            return self.decoder(out).reshape(-1, ntoken)
    return RNNModel()


# ***** 6-layer char-level GPT: embedding 256, T=128, B=8 *****
def char_gpt(lib, vocab=65, n_layer=6, n_embd=256, n_head=8, block_size=128):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):      # minGPT/nanoGPT's block, pre-norm, causal attention
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.fc = nn.Linear(n_embd, 4 * n_embd)
            self.proj = nn.Linear(4 * n_embd, n_embd)
            self.gelu = nn.GELU()

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
            q, k, v = (z.reshape(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.proj(self.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe(lib.arange(t))
            for blk in self.h:
                x = blk(x)
            return self.lm_head(self.ln_f(x)).reshape(-1, vocab)
    return GPT()


# ***** MLP 784-512-512-10 (the training step docs/benchmarks.md measures), B=64 *****
def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


# ***** data *****
def _images(b, c=3, hw=32, classes=10):
    def data(rng):
        return (rng.standard_normal((b, c, hw, hw), dtype=np.float32),
                rng.integers(0, classes, b).astype(np.int64))
    return data


def _dcgan_data(rng):
    z = rng.standard_normal((16, 100, 1, 1), dtype=np.float32)
    target = np.tanh(rng.standard_normal((16, 3, 32, 32))).astype(np.float32)
    return z, target


def _tokens(shape, vocab, flat_targets):
    def data(rng):
        x = rng.integers(0, vocab, shape).astype(np.int64)
        y = rng.integers(0, vocab, (math.prod(shape),)).astype(np.int64)
        return x, y
    return data


WORKLOADS = {
    "convnet": Workload("convnet", "3-block conv net, B=32, 3x32x32",
                        ("Conv2d", "BatchNorm2d", "MaxPool2d"), convnet, _images(32)),
    "resnet18": Workload("resnet18", "ResNet-18, B=8, 3x32x32",
                         ("Conv2d", "BatchNorm2d", "AdaptiveAvgPool2d"), tb_or_torch_resnet18,
                         _images(8)),
    "dcgan": Workload("dcgan", "DCGAN generator (4 ConvTranspose2d + BN), B=16",
                      ("ConvTranspose2d", "BatchNorm2d", "Tanh"), dcgan_generator, _dcgan_data,
                      loss="mse", optimizer="adam", lr=2e-4),
    "lstm": Workload("lstm", "2-layer LSTM LM, hidden 200, seq 35, B=20, 1000 words",
                     ("LSTM", "Embedding"), lstm_lm, _tokens((35, 20), 1000, True), lr=20.0,
                     clip=0.25, optimizer="plain_sgd"),
    "mlp": Workload("mlp", "MLP 784-512-512-10, B=64", ("Linear", "ReLU"), mlp,
                    lambda rng: (rng.standard_normal((64, 784), dtype=np.float32),
                                 rng.integers(0, 10, 64).astype(np.int64))),
    "gpt": Workload("gpt", "6-layer char GPT, embedding 256, T=128, B=8",
                    ("LayerNorm", "Embedding", "GELU", "ModuleList"), char_gpt,
                    _tokens((8, 128), 65, True), optimizer="adam", lr=3e-4),
}
