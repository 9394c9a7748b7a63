"""``tb.numa`` (``torch.numa``): ``tb.numa.binding``'s options for NUMA binding of worker
processes (accepted by the launcher, which does not bind: pin processes with ``numactl`` or
``taskset`` in the launch command)."""
