# A DeepSpeed program in the style of DeepSpeedExamples' cifar10_deepspeed.py (written here).
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import deepspeed
import deepspeed.comm as dist
from deepspeed.accelerator import get_accelerator


def add_argument():
    parser = argparse.ArgumentParser(description="CIFAR")
    parser.add_argument("-e", "--epochs", default=2, type=int)
    parser.add_argument("--local_rank", type=int, default=-1,
                        help="local rank passed from distributed launcher")
    parser.add_argument("--dtype", default="fp16", type=str, choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--stage", default=2, type=int)
    parser.add_argument("--batch", default=16, type=int)
    parser.add_argument("--out", default=None)
    parser.add_argument("--scheduler", default="WarmupLR", choices=["WarmupLR", "OneCycle"])
    parser.add_argument("--save_dir", default=None)
    parser.add_argument("--load_dir", default=None)
    parser = deepspeed.add_config_arguments(parser)
    return parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 1 * 1 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def get_ds_config(args):
    ds_config = {
        "train_batch_size": args.batch,
        "steps_per_print": 2000,
        "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.8, 0.999], "eps": 1e-8,
                                                 "weight_decay": 3e-7}},
        "scheduler": ({"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.001,
                                                      "warmup_num_steps": 10}}
                      if args.scheduler == "WarmupLR" else
                      {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 3e-3,
                                                      "cycle_first_step_size": 6,
                                                      "decay_lr_rate": 0.1, "decay_step_size": 2,
                                                      "cycle_min_mom": 0.85, "cycle_max_mom": 0.95}}),
        "gradient_clipping": 1.0,
        "prescale_gradients": False,
        "bf16": {"enabled": args.dtype == "bf16"},
        "fp16": {"enabled": args.dtype == "fp16", "fp16_master_weights_and_grads": False,
                 "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
                 "initial_scale_power": 15},
        "wall_clock_breakdown": False,
        "zero_optimization": {"stage": args.stage, "allgather_partitions": True,
                              "reduce_scatter": True, "allgather_bucket_size": 50000000,
                              "reduce_bucket_size": 50000000, "overlap_comm": True,
                              "contiguous_gradients": True, "cpu_offload": False},
    }
    return ds_config


class ToyCifar(torch.utils.data.Dataset):
    def __init__(self, n=128):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3, 10, 10)).astype(np.float32)
        self.y = rng.integers(0, 10, n)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return torch.tensor(self.x[i]), int(self.y[i])


def main(args):
    deepspeed.init_distributed()
    torch.manual_seed(0)
    trainset = ToyCifar()
    net = Net()
    parameters = filter(lambda p: p.requires_grad, net.parameters())
    ds_config = get_ds_config(args)
    model_engine, optimizer, trainloader, __ = deepspeed.initialize(
        args=args, model=net, model_parameters=parameters, training_data=trainset,
        config=ds_config)
    local_device = get_accelerator().device_name(model_engine.local_rank)
    local_rank = model_engine.local_rank
    target_dtype = None
    if model_engine.bfloat16_enabled():
        target_dtype = torch.bfloat16
    elif model_engine.fp16_enabled():
        target_dtype = torch.half
    if args.load_dir:
        model_engine.load_checkpoint(args.load_dir)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        running_loss = 0.0
        for i, data in enumerate(trainloader):
            inputs, labels = data[0].to(local_device), data[1].to(local_device)
            if target_dtype is not None:
                inputs = inputs.to(target_dtype)
            outputs = model_engine(inputs)
            loss = criterion(outputs, labels)
            model_engine.backward(loss)
            model_engine.step()
            running_loss += loss.item()
        mean_loss = torch.tensor([running_loss / (i + 1)])
        dist.all_reduce(mean_loss)
        mean_loss /= dist.get_world_size()
        if local_rank == 0:
            print(f"[{epoch + 1}] all-rank loss {mean_loss.item():.5f} applied "
                  f"{model_engine.was_step_applied()}")
            print(f"[{epoch + 1}] loss: {running_loss / (i + 1):.5f} lr {model_engine.get_lr()} "
                  f"steps {model_engine.global_steps}")
    if args.save_dir:
        model_engine.save_checkpoint(args.save_dir)
    if args.out:
        state = model_engine.module.state_dict() if model_engine.zero_optimization_stage() < 2 \
            else None
        if state is not None and model_engine.global_rank == 0:
            torch.save(state, args.out)
    print("Finished Training")


if __name__ == "__main__":
    main(add_argument())
