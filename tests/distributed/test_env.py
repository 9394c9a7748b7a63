"""The placement resolver as a pure function of environment dicts (one row per launcher)."""
import pytest

from tensorbrain.distributed._env import (Placement, expand_nodelist, get_local_rank,
                                          get_local_world_size, get_node_rank, resolve)

TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
            "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}
OMPI = {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}
MPICH = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4"}
SLURM = {"SLURM_PROCID": "9", "SLURM_NTASKS": "12", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
         "SLURM_JOB_NODELIST": "node[10,20-25]", "SLURM_TASKS_PER_NODE": "4(x3)",
         "SLURM_JOB_ID": "4321987"}

# (env, rank, world, local_rank, local_world, node, master_addr, master_port, source)
TABLE = [
    ({}, 0, 1, 0, 1, 0, "127.0.0.1", 29500, "single"),
    (TORCHRUN, 5, 8, 1, 4, 1, "10.0.0.1", 1234, "torchrun"),
    ({"RANK": "3", "WORLD_SIZE": "4"}, 3, 4, 3, 4, 0, "127.0.0.1", 29500, "torchrun"),
    ({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}, 5, 8, 1, 4, 1, "127.0.0.1", 29500,
     "torchrun"),
    ({"RANK": "2", "WORLD_SIZE": "4", "NODE_RANK": "1", "LOCAL_RANK": "0",
      "LOCAL_WORLD_SIZE": "2"}, 2, 4, 0, 2, 1, "127.0.0.1", 29500, "torchrun"),
    (OMPI, 6, 8, 2, 4, 1, None, 29500, "openmpi"),
    ({**OMPI, "MASTER_ADDR": "head"}, 6, 8, 2, 4, 1, "head", 29500, "openmpi"),
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, 1, 2, 1, 2, 0, "127.0.0.1",
     29500, "openmpi"),
    (MPICH, 3, 4, 3, 4, 0, "127.0.0.1", 29500, "mpich"),
    ({"PMI_RANK": "1", "PMI_SIZE": "3"}, 1, 3, 1, 3, 0, "127.0.0.1", 29500, "mpich"),
    ({"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2"}, 1, 2, 1, 2, 0, "127.0.0.1", 29500,
     "mvapich"),
    ({"PMIX_RANK": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0"}, 2, 4, 0, 4, 0, "127.0.0.1",
     29500, "pmix"),
    (SLURM, 9, 12, 1, 4, 2, "node10", 15000 + 1987, "slurm"),
    ({**SLURM, "MASTER_PORT": "40000"}, 9, 12, 1, 4, 2, "node10", 40000, "slurm"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 0, 1, 0, 1, 0, "127.0.0.1", 29500, "slurm"),
    ({**SLURM, "SLURM_TASKS_PER_NODE": "2(x2),8", "SLURM_NODEID": "2", "SLURM_LOCALID": "5"},
     9, 12, 5, 8, 2, "node10", 16987, "slurm"),
    # precedence: torchrun > Open MPI > MPICH > Slurm
    ({**SLURM, **MPICH, **OMPI, **TORCHRUN}, 5, 8, 1, 4, 1, "10.0.0.1", 1234, "torchrun"),
    ({**SLURM, **MPICH, **OMPI}, 6, 8, 2, 4, 1, None, 29500, "openmpi"),
    ({**SLURM, **MPICH}, 3, 4, 3, 4, 0, "127.0.0.1", 29500, "mpich"),
]


@pytest.mark.parametrize("env,rank,world,lr,lws,node,addr,port,source", TABLE)
def test_resolve_table(env, rank, world, lr, lws, node, addr, port, source):
    assert resolve(env) == Placement(rank, world, lr, lws, node, addr, port, source)


@pytest.mark.parametrize("env,match", [
    ({"RANK": "0"}, "RANK is set but WORLD_SIZE is not"),
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE is set but RANK is not"),
    ({"RANK": "4", "WORLD_SIZE": "4"}, r"rank 4 is out of range for world size 4 \(from torchrun"),
    ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK='x' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000"),
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "2"}, "from openmpi"),
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n[1-"}, "unbalanced"),
    ({"PMIX_RANK": "0"}, "no world size variable"),
])
def test_resolve_errors_name_the_variable(env, match):
    with pytest.raises(ValueError, match=match):
        resolve(env)


@pytest.mark.parametrize("nodelist,hosts", [
    ("node01", ["node01"]),
    ("a,b,c", ["a", "b", "c"]),
    ("node[10,20-22]", ["node10", "node20", "node21", "node22"]),
    ("gpu[008-010],cpu[1-2]", ["gpu008", "gpu009", "gpu010", "cpu1", "cpu2"]),
    ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
    ("login-1,compute-[3-4]", ["login-1", "compute-3", "compute-4"]),
])
def test_expand_nodelist(nodelist, hosts):
    assert expand_nodelist(nodelist) == hosts


def test_helpers_read_this_process(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert (get_local_rank(), get_local_world_size(), get_node_rank()) == (1, 2, 1)
