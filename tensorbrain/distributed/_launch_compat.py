"""tbrun's compatibility layer: torchrun's remaining options, ``PET_*`` variables, torchrun's
worker variables and error files, and the option names of ``accelerate launch``, DeepSpeed's
launcher and ``horovodrun`` (see docs/launcher.md for the table).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal

__all__ = ["add_options", "apply_pet_env", "config_file_defaults", "read_simple_yaml",
           "resolve_totals", "worker_env", "read_error_file", "parse_signals",
           "local_rank_argument", "placement_from_env", "accelerate_env"]


class CompatError(ValueError):
    """A bad value in one of the compatibility options (tbrun turns it into status 2)."""


def _add(parser, name, *more, **kw):
    names = [f"--{name}"]
    if "_" in name:
        names.append(f"--{name.replace('_', '-')}")
    parser.add_argument(*more, *names, dest=kw.pop("dest", name), **kw)


def add_options(p) -> None:
    """Add torchrun's remaining options and the other launchers' names to tbrun's parser."""
    g = p.add_argument_group("torchrun options (see the manual for which ones have no effect)")
    _add(g, "role", default="default", help="workers' role name (ROLE_NAME)")
    _add(g, "run_path", action="store_true", help="run the script as a Python file (default)")
    _add(g, "start_method", default="spawn", choices=["spawn", "fork", "forkserver"],
         help="accepted; workers are always fresh processes (as spawn)")
    _add(g, "local_addr", default=None, help="this node's address as the others see it")
    _add(g, "logs_specs", default=None, help="only the default log layout is supported")
    _add(g, "shutdown_timeout", type=int, default=None, help="same as --stop_timeout")
    _add(g, "signals_to_handle", default="SIGTERM,SIGINT,SIGHUP,SIGQUIT",
         help="signals tbrun passes on to the workers")
    _add(g, "numa_binding", default=None, help="accepted; no NUMA binding is done")
    _add(g, "event_log_handler", default="null", help="accepted; events are not logged")
    _add(g, "virtual_local_rank", action="store_true",
         help="LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES=<local rank> in every worker")
    _add(g, "duplicate_stdout_filters", default="",
         help="lines containing any (or *) also go to LOG_DIR/RUN_ID/filtered_stdout.log")
    _add(g, "duplicate_stderr_filters", default="",
         help="lines containing any (or *) also go to LOG_DIR/RUN_ID/filtered_stderr.log")
    _add(g, "no_prefix", action="store_true", help="leave workers' output unprefixed")
    a = p.add_argument_group("other launchers' names (accelerate launch, deepspeed, horovodrun)")
    _add(a, "num_processes", type=int, default=None, help="accelerate: processes in all")
    _add(a, "num_machines", dest="nnodes", help="accelerate: = --nnodes")
    _add(a, "machine_rank", dest="node_rank", type=int, help="accelerate: = --node_rank")
    _add(a, "main_process_ip", dest="master_addr", help="accelerate: = --master_addr")
    _add(a, "main_process_port", dest="master_port", type=int,
         help="accelerate: = --master_port")
    _add(a, "multi_gpu", action="store_true", help="accelerate: accepted (no effect)")
    _add(a, "use_cpu", "--cpu", action="store_true", help="accelerate: accepted (no effect)")
    _add(a, "mixed_precision", default=None, choices=["no", "fp16", "bf16", "fp8"],
         help="accelerate: ACCELERATE_MIXED_PRECISION in the workers (read by their Accelerator)")
    _add(a, "config_file", default=None, help="accelerate: YAML config read for those fields")
    _add(a, "num_cpu_threads_per_process", type=int, default=None,
         help="accelerate: OMP_NUM_THREADS in every worker")
    _add(a, "gpu_ids", default=None, help="accelerate: CUDA_VISIBLE_DEVICES in every worker")
    _add(a, "dynamo_backend", default=None,
         help="accelerate: ACCELERATE_DYNAMO_BACKEND in the workers (no compiler here)")
    _add(a, "same_network", action="store_true", help="accelerate: accepted (no effect)")
    _add(a, "debug", action="store_true", help="accelerate: ACCELERATE_DEBUG_MODE=true")
    a.add_argument("-q", "--quiet", action="store_true", help="accelerate: accepted (no effect)")
    _add(a, "num_gpus", dest="nproc_per_node", help="deepspeed: = --nproc_per_node")
    _add(a, "num_nodes", dest="nnodes", help="deepspeed: = --nnodes")
    _add(a, "hostfile", default=None, help="deepspeed: 'host slots=N' lines, one agent per host")
    a.add_argument("-np", dest="np", type=int, default=None, help="horovodrun: processes in all")
    a.add_argument("-H", "--hosts", dest="hosts", default=None,
                   help="horovodrun: host1:2,host2:2 (one agent per host)")
    _add(a, "no_local_rank", action="store_true",
         help="deepspeed: do not pass --local_rank=N to the workers")
    _add(a, "use_env", action="store_true",
         help="torch.distributed.launch: LOCAL_RANK in the environment only, no --local-rank")
    _add(a, "ssh_port", type=int, default=None, help="ssh port for --hostfile/-H")
    _add(a, "ssh_opts", default="", help="more ssh options for --hostfile/-H, e.g. '-F cfg'")
    p.add_argument("--_watch_stdin", dest="watch_stdin", action="store_true",
                   help=argparse.SUPPRESS)
    # set by tensorbrain.distributed.launch (--local-rank) or by DeepSpeed's names (--local_rank);
    # an option so that the ssh fan-out hands it on to the remote tbruns
    p.add_argument("--_local_rank_arg", dest="local_rank_arg", default=None,
                   choices=["--local-rank", "--local_rank"], help=argparse.SUPPRESS)


def apply_slurm_env(p, env=None) -> bool:
    """Inside a Slurm step with one task per node (``srun tbrun ...``), default the node count,
    node rank and rendezvous address from Slurm: the first host of the step's nodelist serves
    the store, on port 15000 + the job id's last four digits (as ``env://`` under Slurm).
    Returns whether it applied."""
    env = os.environ if env is None else env
    # SLURM_STEP_NUM_* are set by srun only (not in the batch script itself, where a plain
    # `tbrun` is one agent on one node whatever the allocation)
    nodes, tasks = env.get("SLURM_STEP_NUM_NODES"), env.get("SLURM_STEP_NUM_TASKS")
    if not nodes or not env.get("SLURM_NODEID") or tasks != nodes:
        return False  # several tasks per node: each task is its own worker, not an agent
    from ._env import expand_nodelist
    hosts = expand_nodelist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
    job = env.get("SLURM_JOB_ID", "")
    p.set_defaults(nnodes=nodes, node_rank=int(env["SLURM_NODEID"]))
    if hosts:
        p.set_defaults(master_addr=hosts[0])
    if job.isdigit():
        p.set_defaults(master_port=15000 + int(job[-4:]), rdzv_id=f"slurm-{job}")
    return True


def _truthy(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def apply_pet_env(p, env=None) -> None:
    """torchrun's rule: an option not given on the command line takes ``PET_<NAME>``."""
    env = os.environ if env is None else env
    for action in p._actions:
        if not action.option_strings or action.dest in ("help",):
            continue
        raw = env.get(f"PET_{action.dest.upper()}")
        if raw is None:
            continue
        if action.nargs == 0:  # store_true
            p.set_defaults(**{action.dest: _truthy(raw)})
        else:
            p.set_defaults(**{action.dest: raw})  # argparse applies `type` to string defaults


# accelerate's config fields -> tbrun dests
_ACCELERATE_FIELDS = {"mixed_precision": "mixed_precision", "num_processes": "num_processes",
                      "num_machines": "nnodes",
                      "machine_rank": "node_rank", "main_process_ip": "master_addr",
                      "main_process_port": "master_port", "gpu_ids": "gpu_ids"}


def read_simple_yaml(path: str) -> dict:
    """The settings of an Accelerate config file: YAML (PyYAML when installed, else
    ``tensorbrain._yaml``'s subset) or JSON (``accelerate config default``'s)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise CompatError(f"--config_file {path}: {exc.strerror}") from None
    from .. import _yaml
    try:
        return _yaml.parse(text)
    except ValueError as exc:
        raise CompatError(f"--config_file {path}: {exc}") from None


def _value_options(p) -> dict:
    """Each option string of ``p`` -> whether it takes a value."""
    return {s: a.nargs != 0 for a in p._actions for s in a.option_strings}


def _option_name(arg: str, options: dict) -> str | None:
    """The option ``arg`` (without ``=value``) names: itself, or the one it is a unique prefix
    of (argparse's abbreviations)."""
    name = arg.split("=", 1)[0]
    if name in options:
        return name
    matches = [o for o in options if o.startswith(name) and o.startswith("--")]
    return matches[0] if len(matches) == 1 else None


def config_file_defaults(p, argv) -> None:
    """``--config_file F`` among tbrun's options: F's Accelerate fields become defaults.

    The options before the script are walked as argparse reads them (an option that takes a
    value consumes the next word), so ``--config_file`` is found after ``--num_processes 2``
    as well as first.

    Args:
        p: tbrun's argument parser (its defaults are set).
        argv: the command line after the program name.

    Raises:
        CompatError: the file cannot be read or is not an Accelerate config.
    """
    options = _value_options(p)
    path = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--" or not a.startswith("-") or a == "-":
            break                                    # the script (or -m's module) starts here
        name = _option_name(a, options)
        has_value = name is not None and options[name] and "=" not in a
        if name in ("--config_file", "--config-file"):
            if "=" in a:
                path = a.split("=", 1)[1]
            elif i + 1 < len(argv):
                path = argv[i + 1]
        i += 2 if has_value else 1
    if path is None:
        return
    data = read_simple_yaml(path)
    for key, dest in _ACCELERATE_FIELDS.items():
        value = data.get(key)
        if value is not None:   # YAML reads an unquoted `no` (mixed_precision) as false
            p.set_defaults(**{dest: "no" if value is False else str(value)})


def accelerate_env(ns) -> dict:
    """The variables ``accelerate launch``'s own options put in every worker's environment.

    Args:
        ns: the parsed options.

    Returns:
        dict: name -> value (``OMP_NUM_THREADS``, ``CUDA_VISIBLE_DEVICES``,
        ``ACCELERATE_DYNAMO_BACKEND``, ``ACCELERATE_DEBUG_MODE``) for the options given.

    Raises:
        CompatError: ``--num_cpu_threads_per_process`` below 1.
    """
    env = {}
    if ns.num_cpu_threads_per_process is not None:
        if ns.num_cpu_threads_per_process < 1:
            raise CompatError(f"--num_cpu_threads_per_process {ns.num_cpu_threads_per_process}: "
                              "needs at least 1")
        env["OMP_NUM_THREADS"] = str(ns.num_cpu_threads_per_process)
    if ns.gpu_ids and ns.gpu_ids != "all":
        env["CUDA_VISIBLE_DEVICES"] = ns.gpu_ids
    if ns.dynamo_backend:
        env["ACCELERATE_DYNAMO_BACKEND"] = ns.dynamo_backend.upper()
    if ns.debug:
        env["ACCELERATE_DEBUG_MODE"] = "true"
    return env


def resolve_totals(ns) -> None:
    """Turn totals (accelerate's --num_processes, horovodrun's -np) into per-node counts."""
    if ns.node_rank is not None:
        ns.node_rank = int(ns.node_rank)
    if ns.master_port is not None:
        ns.master_port = int(ns.master_port)
    total, what = (ns.num_processes, "--num_processes") if ns.num_processes is not None else \
        (ns.np, "-np")
    if total is None:
        return
    nodes = ns.nnodes.split(":")[-1]
    try:
        nodes = int(nodes)
    except ValueError:
        raise CompatError(f"--nnodes {ns.nnodes!r}: expected N or MIN:MAX") from None
    if total < 1 or total % nodes:
        raise CompatError(f"{what} {total} is not a multiple of {nodes} machine(s); give a "
                          "total that divides evenly, or --nproc_per_node")
    ns.nproc_per_node = str(total // nodes)


def drop_python(ns) -> None:
    """horovodrun/mpirun style ``... python train.py`` (or ``python -m pkg``): the interpreter
    word is dropped, since tbrun starts Python itself (unless --no_python)."""
    if ns.no_python or not re.fullmatch(r"python[0-9.]*", os.path.basename(ns.training_script)):
        return
    args = list(ns.training_script_args)
    while args and args[0] in ("-u", "-B", "-O"):
        args.pop(0)
    if args[:1] == ["-m"] and len(args) > 1:
        ns.module, args = True, args[1:]
    if not args:
        raise CompatError(f"{ns.training_script}: no script after the interpreter")
    ns.training_script, ns.training_script_args = args[0], args[1:]


# options only DeepSpeed's launcher has: a command line using them was written for `deepspeed`
_DEEPSPEED_ONLY = {"--num_gpus", "--num-gpus", "--num_nodes", "--num-nodes", "--no_local_rank",
                   "--no-local-rank"}


def local_rank_argument(ns, options: list) -> str | None:
    """The ``--local_rank=N`` style argument the workers get before their own arguments, if any.

    ``deepspeed`` passes ``--local_rank=<local rank>`` to every worker (unless
    ``--no_local_rank``), and DeepSpeed scripts read it (``if args.local_rank == -1`` often means
    "not distributed"), so a command line using DeepSpeed's own options (``--num_gpus``,
    ``--num_nodes``, or ``--hostfile`` without horovodrun's ``-np``) gets the same.
    ``tensorbrain.distributed.launch`` asks for torch.distributed.launch's ``--local-rank``
    (unless ``--use-env``). torchrun and tbrun's own spelling pass none.

    Args:
        ns: the parsed options.
        options: tbrun's options as given (the command line before the script).

    Returns:
        str | None: ``"--local_rank"``, ``"--local-rank"`` or None.
    """
    if ns.local_rank_arg == "--local-rank":
        if ns.use_env:
            return None
        if ns.no_python:
            raise CompatError("torch.distributed.launch: --no-python needs --use-env (a program "
                              "that is not Python cannot be handed --local-rank)")
        return ns.local_rank_arg
    if ns.local_rank_arg or ns.no_local_rank:
        return None if ns.no_local_rank else ns.local_rank_arg
    names = {o.split("=", 1)[0] for o in options if o.startswith("-")}
    if names & _DEEPSPEED_ONLY or ("--hostfile" in names and ns.np is None):
        return "--local_rank"
    return None


def placement_from_env(ns, nproc: int, env=None) -> str | None:
    """Take the node count, node rank and store address from ``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR`` (``MASTER_PORT``) exported before tbrun, as the guide's multi-machine recipe
    does (``export RANK=4 WORLD_SIZE=8 MASTER_ADDR=...`` then ``torchrun --nproc_per_node=4``).

    torchrun ignores these and each machine trains alone; tbrun uses them when they describe whole
    nodes (``WORLD_SIZE`` a multiple of ``nproc`` larger than it, ``RANK`` a multiple of ``nproc``)
    and nothing on the command line (``--nnodes``, ``--node_rank``, ``--rdzv_endpoint``,
    ``--standalone``), in ``PET_*`` or from Slurm says otherwise. Not inside a launched worker
    (``LOCAL_RANK`` set): there they are that worker's own.

    Args:
        ns: the parsed options; ``nnodes``, ``node_rank``, ``master_addr``, ``master_port`` are
            set when the variables are used.
        nproc: workers per node.
        env: the environment; None for ``os.environ``.

    Returns:
        str | None: what tbrun took, for a notice; None when the variables were not used.
    """
    env = os.environ if env is None else env
    rank, world, addr = env.get("RANK", ""), env.get("WORLD_SIZE", ""), env.get("MASTER_ADDR")
    if (not rank.isdigit() or not world.isdigit() or not addr or "LOCAL_RANK" in env
            or ns.nnodes != "1" or ns.node_rank is not None or ns.rdzv_endpoint
            or ns.standalone):
        return None
    rank_i, world_i = int(rank), int(world)
    if world_i <= nproc or world_i % nproc or rank_i % nproc or rank_i >= world_i:
        return None
    ns.nnodes, ns.node_rank = str(world_i // nproc), rank_i // nproc
    if ns.master_addr == "127.0.0.1":
        ns.master_addr = addr
    port = env.get("MASTER_PORT", "")
    if ns.master_port == 29500 and port.isdigit():
        ns.master_port = int(port)
    return (f"RANK={rank}, WORLD_SIZE={world} and MASTER_ADDR={addr} are set: this is node "
            f"{ns.node_rank} of {ns.nnodes} (--nnodes {ns.nnodes} --node_rank {ns.node_rank} "
            f"--master_addr {ns.master_addr} --master_port {ns.master_port}); each worker gets "
            "its own RANK (torchrun would ignore them and train on each machine alone)")


def parse_signals(text: str) -> list:
    """``SIGTERM,SIGINT`` -> signal numbers (an unknown name is an error)."""
    out = []
    for name in filter(None, (x.strip().upper() for x in text.split(","))):
        if not name.startswith("SIG"):
            name = "SIG" + name
        try:
            out.append(signal.Signals[name])
        except KeyError:
            raise CompatError(f"--signals_to_handle: unknown signal {name}") from None
        if out[-1] in (signal.SIGKILL, signal.SIGSTOP):
            raise CompatError(f"--signals_to_handle: {name} cannot be handled")
    return out


def error_file_path(root: str, run_id: str, round_: int, local_rank: int) -> str:
    """Where a worker's error file goes (torchrun's layout)."""
    return os.path.join(root, run_id, f"attempt_{round_}", str(local_rank), "error.json")


def worker_env(cfg, agent, local_rank: int, node_rank: int) -> dict:
    """torchrun's variables for one worker (beyond RANK/WORLD_SIZE/...)."""
    err = error_file_path(agent.error_root(), cfg.run_id, agent.round, local_rank)
    os.makedirs(os.path.dirname(err), exist_ok=True)  # torch's @record expects the folder
    try:
        os.unlink(err)  # a previous round's file must not be taken for this one's
    except FileNotFoundError:
        pass
    env = {"GROUP_WORLD_SIZE": str(getattr(agent, "nnodes", 1) if agent.multi else 1),
           "ROLE_NAME": cfg.role,
           "TORCHELASTIC_RESTART_COUNT": str(agent.restarts),
           "TORCHELASTIC_MAX_RESTARTS": str(cfg.max_restarts),
           "TORCHELASTIC_RUN_ID": cfg.run_id,
           "TORCHELASTIC_ERROR_FILE": err}
    if cfg.mixed_precision:
        env["ACCELERATE_MIXED_PRECISION"] = cfg.mixed_precision
    env.update(cfg.extra_env)
    if cfg.virtual_local_rank:
        env["LOCAL_RANK"] = "0"
        env["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    return env


def read_error_file(path: str) -> dict | None:
    """A worker's recorded exception: {"message", "traceback"} or None."""
    try:
        with open(path) as f:
            data = json.load(f)
        msg = data["message"]
        if isinstance(msg, str):
            return {"message": msg, "traceback": ""}
        return {"message": msg.get("message", ""),
                "traceback": msg.get("extraInfo", {}).get("py_callstack", "")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
