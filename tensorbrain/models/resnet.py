"""ResNet-18/34/50 with torchvision's structure, attribute names and initialisation.

The state dict keys are torchvision's (``conv1.weight``, ``layer1.0.bn1.running_mean``,
``layer2.0.downsample.0.weight``, ``fc.bias``...), so weights move between the two through
safetensors. No pretrained weights are downloaded: ``weights`` must be None (load a state dict
yourself).

>>> import tensorbrain as tb
>>> m = tb.models.resnet18(num_classes=10)
>>> sum(p.numel() for p in m.parameters())
11181642
"""
from __future__ import annotations

from .. import nn


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    """A 3x3 convolution with padding 1 and no bias (torchvision's helper).

    Args:
        in_planes: input channels.
        out_planes: output channels.
        stride: the stride.
        groups: grouped-convolution groups.
        dilation: the dilation (also the padding).

    Returns:
        An ``nn.Conv2d``.
    """
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    """A 1x1 convolution without bias (torchvision's helper).

    Args:
        in_planes: input channels.
        out_planes: output channels.
        stride: the stride.

    Returns:
        An ``nn.Conv2d``.
    """
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """ResNet-18/34's residual block: two 3x3 convolutions with BatchNorm and a shortcut.

    Args:
        inplanes: input channels.
        planes: output channels.
        stride: the first convolution's stride.
        downsample: a module applied to the shortcut when shapes change, or None.
        groups: must be 1 (as torchvision's).
        base_width: must be 64 (as torchvision's).
        dilation: must be 1 (as torchvision's).
        norm_layer: the normalisation class (default ``nn.BatchNorm2d``).

    Raises:
        ValueError: groups != 1 or base_width != 64.
        NotImplementedError: dilation > 1.
    """
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (stride here, as torchvision's "ResNet V1.5"), 1x1 expand by 4.

    Args:
        inplanes: input channels.
        planes: the bottleneck's width (the output has ``4 * planes`` channels).
        stride: the 3x3 convolution's stride.
        downsample: a module applied to the shortcut when shapes change, or None.
        groups: grouped-convolution groups of the 3x3 convolution.
        base_width: the width per group (ResNeXt/wide ResNets).
        dilation: the 3x3 convolution's dilation.
        norm_layer: the normalisation class (default ``nn.BatchNorm2d``).
    """

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet: stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool), four stages, global
    average pool, ``fc``. Convs are ``kaiming_normal_(mode='fan_out', nonlinearity='relu')``,
    norms weight 1 / bias 0; ``zero_init_residual`` zeroes each block's last BN weight."""

    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, groups=1,
                 width_per_group=64, replace_stride_with_dilation=None, norm_layer=None):
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        replace_stride_with_dilation = replace_stride_with_dilation or [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None or a 3-element tuple, "
                             f"got {replace_stride_with_dilation}")
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2,
                                       dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2,
                                       dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       norm_layer(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                        previous_dilation, norm_layer)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups,
                                base_width=self.base_width, dilation=self.dilation,
                                norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x).flatten(1)
        return self.fc(x)


def _resnet(block, layers, weights, progress, **kwargs):
    if weights is not None:
        raise ValueError("TensorBrain downloads no pretrained weights: build the model with "
                         "weights=None and load a state dict (e.g. converted from torchvision "
                         "with safetensors) via model.load_state_dict(...)")
    return ResNet(block, layers, **kwargs)


def resnet18(*, weights=None, progress=True, **kwargs) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2]), 11.7 M parameters at 1000 classes.

    Args:
        weights: must be None (no pretrained weights are downloaded).
        progress: ignored (torchvision's download progress bar).
        **kwargs: passed to ``ResNet`` (e.g. ``num_classes``).
    """
    return _resnet(BasicBlock, [2, 2, 2, 2], weights, progress, **kwargs)


def resnet34(*, weights=None, progress=True, **kwargs) -> ResNet:
    """ResNet-34 (BasicBlock, [3, 4, 6, 3]), 21.8 M parameters at 1000 classes.

    Args:
        weights: must be None (no pretrained weights are downloaded).
        progress: ignored (torchvision's download progress bar).
        **kwargs: passed to ``ResNet`` (e.g. ``num_classes``).
    """
    return _resnet(BasicBlock, [3, 4, 6, 3], weights, progress, **kwargs)


def resnet50(*, weights=None, progress=True, **kwargs) -> ResNet:
    """ResNet-50 (Bottleneck, [3, 4, 6, 3]), 25.6 M parameters at 1000 classes.

    Args:
        weights: must be None (no pretrained weights are downloaded).
        progress: ignored (torchvision's download progress bar).
        **kwargs: passed to ``ResNet`` (e.g. ``num_classes``).
    """
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, progress, **kwargs)


class ResNet50(ResNet):
    """``tb.models.ResNet50(num_classes=...)``: a ResNet-50 as a class (the distributed guide's
    spelling; ``tb.nn.ResNet50`` names it too); the same module and keys as ``resnet50()``.

    Args:
        **kwargs: passed to ``ResNet`` (e.g. ``num_classes=10``).
    """

    def __init__(self, num_classes=1000, **kwargs):
        super().__init__(Bottleneck, [3, 4, 6, 3], num_classes=num_classes, **kwargs)

    def _get_name(self):
        return "ResNet"
