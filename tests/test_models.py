"""tb.models: torchvision's ResNet structure (parameter counts, keys), outputs vs torch with
copied weights, and the tiny transformer."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import models, nn

# Parameter counts of torchvision's models (1000 classes), from torchvision's model table:
# resnet18 11,689,512; resnet34 21,797,672; resnet50 25,557,032.
TORCHVISION_PARAMS = {"resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032}


@pytest.mark.parametrize("name", ["resnet18", "resnet34", "resnet50"])
def test_resnet_parameter_counts_match_torchvision(name):
    model = getattr(models, name)()
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION_PARAMS[name]


def test_resnet50_state_dict_keys_follow_torchvision():
    keys = list(nn.ResNet50(num_classes=10).state_dict())
    assert len(keys) == 320  # torchvision's resnet50 state dict has 320 entries
    assert keys[:7] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                        "bn1.running_var", "bn1.num_batches_tracked", "layer1.0.conv1.weight"]
    assert "layer2.0.downsample.0.weight" in keys and "layer4.2.bn3.running_var" in keys
    assert keys[-2:] == ["fc.weight", "fc.bias"]
    assert repr(nn.ResNet50()).startswith("ResNet(\n  (conv1): Conv2d(3, 64, kernel_size=(7, 7)")


def test_resnet18_forward_backward_shapes_and_init():
    tb.manual_seed(0)
    m = models.resnet18(num_classes=7, zero_init_residual=True)
    assert (m.layer1[0].bn2.weight._data == 0).all()
    fan_out = 64 * 7 * 7  # conv1: kaiming_normal_(mode="fan_out", nonlinearity="relu")
    assert m.conv1.weight._data.std() == pytest.approx(np.sqrt(2 / fan_out), rel=0.05)
    out = m(tb.randn(2, 3, 32, 32))
    assert out.shape == (2, 7)
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    with pytest.raises(ValueError, match="pretrained"):
        models.resnet18(weights="IMAGENET1K_V1")


def test_resnet_matches_torch_with_copied_weights():
    torch = pytest.importorskip("torch")
    tv_models = pytest.importorskip("torchvision.models")
    ours = models.resnet18(num_classes=5)
    theirs = tv_models.resnet18(num_classes=5)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v._data))
                            for k, v in ours.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    for train in (True, False):
        ours.train(train)
        theirs.train(train)
        np.testing.assert_allclose(ours(tb.tensor(x))._data,
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-3, atol=1e-4)


def test_bottleneck_block_matches_torch():
    torch = pytest.importorskip("torch")
    # torchvision is optional: build its Bottleneck by hand from torch.nn (same layout)

    class TorchBottleneck(torch.nn.Module):
        def __init__(self, inplanes, planes, stride):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(planes)
            self.conv2 = torch.nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(planes)
            self.conv3 = torch.nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = torch.nn.BatchNorm2d(planes * 4)
            self.relu = torch.nn.ReLU(inplace=True)
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False),
                torch.nn.BatchNorm2d(planes * 4))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + self.downsample(x))

    down = nn.Sequential(models.resnet.conv1x1(8, 16, 2), nn.BatchNorm2d(16))
    ours = models.Bottleneck(8, 4, stride=2, downsample=down)
    theirs = TorchBottleneck(8, 4, 2)
    theirs.load_state_dict({k: torch.from_numpy(np.array(v._data))
                            for k, v in ours.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((2, 8, 9, 9)).astype(np.float32)
    xt, xr = tb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(xt), theirs(xr)
    np.testing.assert_allclose(out._data, ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(xt.grad._data, xr.grad.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ours.conv2.weight.grad._data, theirs.conv2.weight.grad.numpy(),
                               rtol=1e-3, atol=1e-3)


def test_tiny_transformer_trains_on_a_toy_task():
    tb.manual_seed(0)
    model = models.TinyTransformer(vocab_size=6, num_classes=2, d_model=16, nhead=2,
                                   num_layers=1, dropout=0.0, max_len=6)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 6, (64, 6))
    labels = (tokens == 5).any(1).astype(np.int64)  # "does token 5 occur?"
    opt = tb.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(40):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(tb.tensor(tokens)), tb.tensor(labels))
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
