"""Functions for test_start_processes (spawned children import them by module path)."""
import os


def square(x):
    print(f"rank value {x}")
    return {"rank": int(os.environ["LOCAL_RANK"]), "sq": x * x}


def boom(x):
    if x == 1:
        raise ValueError(f"boom on {x}")
    return x
