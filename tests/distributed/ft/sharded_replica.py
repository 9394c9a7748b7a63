"""One process of a 2-D job (replicate x shard): ``python -m tests.distributed.ft.sharded_replica
OUT`` with ``FT_GROUP`` (its replica group's name) and ``FT_GROUP_RANK`` (its shard, of 2).

Each replica group holds the model's flat parameter vector sharded over its 2 processes, as
ZeRO-3/FSDP: per step the shard group all-gathers the parameters, every process computes the
gradient of its part of the global batch, the shard group reduce-scatters it (each process gets
the sum for its shard), and the manager averages each shard's gradient over the replica groups
(the replicate dimension). SGD with momentum on the shard. The data set, model and global batch
are ``replica.py``'s, so one process on the whole batch is the reference. ``FT_KILL_AT=s``:
SIGKILL in step s after the forward.
"""
import json
import os
import signal
import sys
import time

import numpy as np

T0 = time.time()

import tensorbrain as tb  # noqa: E402
import tensorbrain.distributed as dist  # noqa: E402
import tensorbrain.distributed.ft as ft  # noqa: E402
from tensorbrain.distributed.errors import DistError  # noqa: E402
from tests.distributed.ft.replica import batch, data, model  # noqa: E402

K = 2  # processes per replica group


def main(out_path):
    env = os.environ
    steps, g = int(env.get("FT_STEPS", "40")), int(env.get("FT_G", "48"))
    kill_at = int(env.get("FT_KILL_AT", "-1"))
    pause = float(env.get("FT_PAUSE", "0.05"))
    me = int(env["FT_GROUP_RANK"])
    net = model(16, int(env.get("FT_SEED", "7")))
    params = list(net.parameters())
    flat = np.concatenate([p.detach().numpy().reshape(-1) for p in params])
    per = -(-flat.size // K)
    flat = np.pad(flat, (0, per * K - flat.size))
    shard = {"w": flat[me * per:(me + 1) * per].copy(), "m": np.zeros(per, np.float32)}
    manager = ft.Manager(state_dict=lambda: dict(shard),
                         load_state_dict=lambda s: shard.update(w=np.array(s["w"]),
                                                                m=np.array(s["m"])),
                         config={"g": g}, timeout=float(env.get("FT_TIMEOUT", "5")),
                         replica_group=env["FT_GROUP"], group_size=K, group_rank=me)
    x, y = data()
    log = open(out_path, "a")
    log.write(json.dumps({"start": T0, "pid": os.getpid(), "id": manager.replica_id}) + "\n")
    while manager.current_step() < steps:
        manager.start_step()
        step = manager.current_step()
        loss = None
        try:
            shards = manager.mesh.get_group("shard")
            parts = [tb.zeros(per) for _ in range(K)]
            dist.all_gather(parts, tb.tensor(shard["w"]), group=shards)
            full = np.concatenate([p.numpy() for p in parts])
            at = 0
            for p in params:
                p._data[...] = full[at:at + p.numel()].reshape(p.shape)
                p.grad = None
                at += p.numel()
            mine = np.array_split(batch(step, g), manager.world_size())[manager.rank()]
            loss = tb.nn.functional.cross_entropy(net(tb.tensor(x[mine])), tb.tensor(y[mine]))
            if step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            loss.backward()
            grad = np.concatenate([p.grad.numpy().reshape(-1) for p in params])
            grad = np.pad(grad, (0, per * K - grad.size)) / K
            out = tb.zeros(per)
            dist.reduce_scatter(out, [tb.tensor(grad[i * per:(i + 1) * per]) for i in range(K)],
                                group=shards)
            manager.allreduce(out).wait()
        except DistError as exc:
            manager.report_error(exc)
        committed = manager.should_commit()
        if committed:
            shard["m"] = 0.9 * shard["m"] + out.numpy()
            shard["w"] = shard["w"] - 0.2 * shard["m"]
        log.write(json.dumps({"step": step, "world": manager.world_size(),
                              "replicas": manager.num_replicas(),
                              "loss": None if loss is None else float(loss.item()),
                              "committed": committed, "t": time.time()}) + "\n")
        log.flush()
        time.sleep(pause)
    log.write(json.dumps({"final": shard["w"].tolist(), "pid": os.getpid(),
                          "events": [e["msg"] for e in manager.events]}) + "\n")
    log.close()
    manager.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
