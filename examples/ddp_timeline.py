"""A short DDP run for TB_TIMELINE (docs/observability.md): a few steps of a 3-layer MLP with
small buckets, so the timeline shows buckets overlapping backward, then a few explicit collectives.

    TB_TIMELINE=/tmp/tl.json tbrun --standalone --nproc_per_node 2 examples/ddp_timeline.py
"""
import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("tcp")
    tb.manual_seed(0)
    model = tb.nn.Sequential(tb.nn.Linear(256, 512), tb.nn.ReLU(), tb.nn.Linear(512, 512),
                             tb.nn.ReLU(), tb.nn.Linear(512, 10))
    ddp = DDP(model, bucket_cap_mb=0.5)
    opt = tb.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = tb.randn(64, 256), tb.randint(0, 10, (64,))
    for _ in range(3):
        opt.zero_grad()
        tb.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    t = tb.ones(1 << 18)
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    outs = [tb.zeros(1 << 16) for _ in range(dist.get_world_size())]
    dist.all_gather(outs, tb.ones(1 << 16))
    dist.barrier()
    dist.destroy_process_group()  # writes the timeline


if __name__ == "__main__":
    main()
