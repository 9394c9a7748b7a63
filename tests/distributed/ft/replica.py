"""One replica of the live-recovery tests: ``python -m tests.distributed.ft.replica OUT``.

A small MLP classifies a fixed synthetic data set; step ``s`` trains on the global batch
``s`` (``G`` samples), which the live replicas split evenly, so every world size computes the
same gradient as one process on the whole batch (the reference in the tests). Settings come
from ``FT_*`` variables (below); the store from ``MASTER_ADDR``/``MASTER_PORT``. Every step
appends a JSON line to ``OUT`` (step, world, rank, loss, committed, time); the last line holds
the final parameters, the full data set's loss and the manager's events.

``FT_KILL_AT=s`` SIGKILLs this replica in step s after its forward (the others are in the
gradient all_reduce by then); ``FT_STOP_AT=s`` SIGSTOPs it there instead. Under tbrun, where
every worker gets the same variables, ``FT_VICTIM=<local rank>`` picks the one, and a
replacement (``TB_RESTART_COUNT`` > 0) never kills itself.
"""
import json
import os
import signal
import sys
import time

import numpy as np

T0 = time.time()

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed.ft as ft  # noqa: E402

N, FEATURES, CLASSES = 960, 8, 4


def data():
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((N, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES, CLASSES)).astype(np.float32)
    return x, np.argmax(x @ w, axis=1).astype(np.int64)


def model(width, seed):
    tb.manual_seed(seed)
    return tb.nn.Sequential(tb.nn.Linear(FEATURES, width), tb.nn.Tanh(),
                            tb.nn.Linear(width, CLASSES))


def batch(step, g):
    perm = np.random.default_rng(step // (N // g)).permutation(N)
    at = (step % (N // g)) * g
    return perm[at:at + g]


def reference(steps, g, seed, width=16):
    """The unfailed run's final loss on the whole data set: one process, the whole batch."""
    net = model(width, seed)
    opt = tb.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    x, y = data()
    for step in range(steps):
        opt.zero_grad()
        idx = batch(step, g)
        tb.nn.functional.cross_entropy(net(tb.tensor(x[idx])), tb.tensor(y[idx])).backward()
        opt.step()
    return float(tb.nn.functional.cross_entropy(net(tb.tensor(x)), tb.tensor(y)).item())


def main(out_path):
    env = os.environ
    steps, g = int(env.get("FT_STEPS", "40")), int(env.get("FT_G", "48"))
    kill_at, stop_at = int(env.get("FT_KILL_AT", "-1")), int(env.get("FT_STOP_AT", "-1"))
    if env.get("FT_VICTIM") not in (None, env.get("LOCAL_RANK")) or \
            env.get("TB_RESTART_COUNT", "0") != "0":  # under tbrun: one victim, not its replacement
        kill_at = stop_at = -1
    pause = float(env.get("FT_PAUSE", "0.05"))
    width = int(env.get("FT_WIDTH", "16"))
    net = model(width, int(env.get("FT_SEED", os.getpid())))  # by default replicas start apart
    opt = tb.optim.SGD(net.parameters(), lr=0.2, momentum=0.9)
    manager = ft.Manager(net, opt, config={"lr": float(env.get("FT_LR", "0.2")), "g": g},
                         min_replicas=int(env.get("FT_MIN", "1")),
                         timeout=float(env.get("FT_TIMEOUT", "5")),
                         join_timeout=float(env.get("FT_JOIN_TIMEOUT", "60")))
    ddp = ft.DistributedDataParallel(manager, net)
    optim = ft.OptimizerWrapper(manager, opt)
    x, y = data()
    with open(out_path, "a") as log:
        log.write(json.dumps({"start": T0, "pid": os.getpid(), "id": manager.replica_id,
                              "joined_at": time.time(), "step": manager.current_step()}) + "\n")
        while manager.current_step() < steps:
            optim.zero_grad()
            step = manager.current_step()
            mine = np.array_split(batch(step, g), manager.world_size())[manager.rank()]
            loss = tb.nn.functional.cross_entropy(ddp(tb.tensor(x[mine])), tb.tensor(y[mine]))
            if step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if step == stop_at:
                os.kill(os.getpid(), signal.SIGSTOP)
            loss.backward()
            committed = optim.step()
            log.write(json.dumps({"step": step, "world": manager.world_size(),
                                  "rank": manager.rank(), "loss": float(loss.item()),
                                  "committed": committed, "t": time.time()}) + "\n")
            log.flush()
            time.sleep(pause)
        full = float(tb.nn.functional.cross_entropy(net(tb.tensor(x)), tb.tensor(y)).item())
        log.write(json.dumps({"final": [p.detach().numpy().tolist() for p in net.parameters()],
                              "full_loss": full, "pid": os.getpid(),
                              "events": [e["msg"] for e in manager.events]}) + "\n")
    manager.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
