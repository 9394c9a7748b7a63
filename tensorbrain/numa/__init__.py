"""``tb.numa`` (``torch.numa``): NUMA binding of worker processes is refused by name
(``tb.numa.binding``); pin processes with ``numactl`` or ``taskset`` in the launch command
instead."""
