"""Functions the multiprocessing tests run in spawned children (importable by name)."""
import os
import signal
import sys
import time

import tensorbrain as tb


def add_rank(i, model, flag):
    with tb.no_grad():  # each child its own row: concurrent += on one element would race
        model.weight[i].add_(i + 1)
    flag.fill_(1.0)  # a plain tensor argument is shared too


def hogwild(i, model, x, y, steps):
    opt = tb.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        tb.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def fail_one(i, pid_file):
    with open(f"{pid_file}.{i}", "w") as f:
        f.write(str(os.getpid()))
    if i == 1:
        time.sleep(0.5)
        raise ValueError(f"boom in child {i}")
    time.sleep(120)


def exit_code(i):
    if i == 0:
        sys.exit(3)
    time.sleep(120)


def killed(i):
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def put_tensor(i, q):
    t = tb.full((1000,), float(i + 1))
    q.put(t)
    q.put(None)
    time.sleep(1.0)  # keep the tensor alive until the parent has mapped it


def shared_adam_steps(i, model, optimizer, x, y, steps):
    """A3C-style worker: a local copy of the model, its gradients handed to the shared model
    with ``shared_param._grad = param.grad``, the shared Adam (base ``step``) updating it."""
    local = tb.nn.Linear(x.shape[1], 1)
    for _ in range(steps):
        local.load_state_dict(model.state_dict())
        local.zero_grad()
        tb.nn.functional.mse_loss(local(x), y).backward()
        for p, shared in zip(local.parameters(), model.parameters()):
            shared._grad = p.grad
        optimizer.step()
