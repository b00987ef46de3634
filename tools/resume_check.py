"""Check that a script, yours or a modified copy of ours, still resumes exactly.

    python tools/resume_check.py ppo_discrete.py
    python tools/resume_check.py my_ppo.py --env-id CartPole-v1 --total-timesteps 8192

It trains the script three times in this process, in temporary folders, with the flags given (by
default --total-timesteps 20000 --eval-episodes 2) and always --checkpoint-every 1, so that every
update leaves a checkpoint. The first run goes through
uninterrupted. The second is stopped by a Ctrl-C after half of its updates and then goes on with
--resume from its last checkpoint. A script that resumes exactly gives both runs the same bits
after every update: every value of `state()` but the envs (weights, optimiser state, episodic
returns, ...), and at the end the greedy evaluation. Objects it cannot read compare equal. The
check prints "resumes exactly", or the first update after which the runs part, what kind of
state that points to, and the first value that differs there. It exits with 0 or 1.

The kind: a third run resumes from the same checkpoint with Python's and NumPy's global
generators in another state. If it parts from the second run, the loop draws from one of them,
and `train` seeds them only at its start. If not, the loop keeps a value that the checkpoint
lacks: one that `state()` does not name, or names but `train` does not read back.

What it finds: state that the loop keeps but `state()` does not name (a target network, an EMA,
a counter), which a resumed run restarts from its initial value; state that `state()` names but
`train` does not read back; random numbers drawn from a generator the checkpoint does not save.
Classic-control envs are saved in the checkpoint; Box2D and MuJoCo envs are not, so a resumed run
there begins new episodes and cannot match (the script says so when it resumes).
"""

import argparse
import importlib.util
import math
import os
import random
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
import tyro

SHORT = {"total_timesteps": 20_000, "eval_episodes": 2}  # unless given: a few updates, two episodes


def import_script(path: Path):
    """The script as the module named after its file, as it runs from the command line, so that
    its checkpoints unpickle its classes by that name."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def import_tooling():
    """The tooling.py beside the script, or else on the path, or else pgref's own."""
    sys.path.append(str(Path(__file__).resolve().parent.parent))
    return importlib.import_module("tooling")


def stopping_at(module, update: int):
    """`module.train` with a Ctrl-C after `update` updates, as a user's."""
    train = module.train

    def train_then_stop(args, writer=None, hook=None):
        done = 0

        def hook_then_stop(state, losses=None):
            nonlocal done
            out = hook(state, losses)
            done += losses is not None
            if done == update:
                raise KeyboardInterrupt
            return out

        return train(args, writer, hook_then_stop)

    return train_then_stop


def comparable(value):
    """What a value of `state()` holds, as plain data: tensors of a module or an optimiser, arrays,
    numbers. None for what cannot be compared (the envs)."""
    if hasattr(value, "state_dict"):
        value = value.state_dict()
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().copy()  # a copy: the loop goes on changing the tensor
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, int | float | str | bool | np.generic) or value is None:
        return value
    return comparable(vars(value)) if hasattr(value, "__dict__") else None  # a normaliser


def first_difference(a, b, where: str) -> str | None:
    """Where two comparable values first differ, bit for bit (NaN equals NaN), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(map(str, a))} against {sorted(map(str, b))}"
        return next((d for k in a if (d := first_difference(a[k], b[k], f"{where}[{k!r}]"))), None)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items against {len(b)}"
        pairs = enumerate(zip(a, b, strict=True))
        return next((d for i, (x, y) in pairs if (d := first_difference(x, y, f"{where}[{i}]"))), None)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"{where}: shape {a.shape} against {b.shape}"
        nan = a.dtype.kind == "f" and b.dtype.kind == "f"
        differ = (a != b) & ~(np.isnan(a) & np.isnan(b)) if nan else a != b
        if not differ.any():
            return None
        index = np.unravel_index(np.flatnonzero(differ)[0], a.shape)  # the first that differs
        at = "".join(f"[{i}]" for i in index)
        return f"{where}{at}: {a[index].item()!r} against {b[index].item()!r}"
    same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return None if same else f"{where}: {a!r} against {b!r}"


def kind(parted: bool) -> str:
    """What kind of state a resume loses, from whether two resumes of one checkpoint part when
    Python's and NumPy's global generators differ."""
    if parted:
        return ("random numbers drawn from Python's or NumPy's global generator, which the "
                "checkpoint does not save: draw them from torch's (saved) or a generator in state()")
    return ("loop state that state() does not name, or names and train does not read back (a "
            "counter, a schedule, a coefficient, a target network, a generator of its own): add it "
            "to state() and to the lines that read state back")


def check(path: Path, flags: list[str]) -> str | None:
    """The first update after which an uninterrupted run and a stopped-and-resumed one part, with
    the kind of state it points to and the first value that differs. Where every update agrees,
    the first value of the final states (or the evaluation) that differs. Else None."""
    module, tooling = import_script(path), import_tooling()
    given = {a.split("=")[0].removeprefix("--").replace("-", "_") for a in flags if a.startswith("--")}
    defaults = {k: v for k, v in SHORT.items() if k not in given}
    train = module.train

    def recording(updates: list, reseed: bool = False):
        """`train` that appends its state after each update, as plain data, to `updates`; with
        `reseed`, Python's and NumPy's generators are put in another state once it has begun."""
        def train_recording(args, writer=None, hook=None):
            def record(state, losses=None):
                out = hook(state, losses)
                if losses is not None:
                    updates.append({k: comparable(v) for k, v in state.items() if k != "envs"})
                elif reseed:
                    random.seed(2**31 - 1)
                    np.random.seed(2**31 - 1)
                return out
            return train(args, writer, record)
        return train_recording

    with tempfile.TemporaryDirectory() as tmp:
        def args(**more):
            base = tyro.cli(tooling.run_args(module), args=flags)
            return tooling.run_args(module)(**{**vars(base), **defaults, "checkpoint_every": 1, "log_dir": tmp, **more})

        whole_updates, resumed_updates, reseeded_updates = [], [], []
        module.train = recording(whole_updates)
        whole = tooling.main(module, args(log_dir=f"{tmp}/whole"))
        updates = len(whole_updates)
        if updates < 2:
            sys.exit("resume_check.py: error: the run has fewer than 2 updates: give a larger --total-timesteps")
        module.train = train
        module.train = stopping_at(module, updates // 2)
        try:
            tooling.main(module, args(log_dir=f"{tmp}/stopped"))
        except SystemExit as stop:
            assert stop.code == 130, stop.code
        (checkpoint,) = Path(f"{tmp}/stopped").glob("*/checkpoint.pt")
        saved = open(checkpoint, "rb").read()
        module.train = recording(resumed_updates)
        resumed = tooling.main(module, args(log_dir=f"{tmp}/stopped", resume=str(checkpoint)))
        checkpoint.write_bytes(saved)  # the checkpoint of the stop again, for a third run
        module.train = recording(reseeded_updates, reseed=True)
        tooling.main(module, args(log_dir=f"{tmp}/stopped", resume=str(checkpoint)))
        module.train = train
        first = updates // 2 + 1
        for update, (a, b) in enumerate(zip(resumed_updates, whole_updates[first - 1:], strict=True), first):
            difference = first_difference(a, b, "state()")
            if difference:
                parted = first_difference(a, reseeded_updates[update - first], "") is not None
                after = "the first after the resume" if update == first else f"the first after the resume was {first}"
                return (f"the runs part in update {update} of {updates}, {after}: {kind(parted)}. The first "
                        f"value that differs: {difference} (resumed against uninterrupted)")
        for name in whole:
            if name in ("envs", "run_dir"):
                continue
            if name not in resumed:
                return f"{name}: in the uninterrupted run's state, not in the resumed run's"
            difference = first_difference(comparable(resumed[name]), comparable(whole[name]), name)
            if difference:
                return difference + " (resumed against uninterrupted)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path, help="the script to check, e.g. ppo_discrete.py or your copy")
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="its flags (default: a short run of it)")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    difference = check(options.script.resolve(), options.flags)
    if difference:
        print(f"{options.script}: does not resume exactly; {difference}")
        sys.exit(1)
    print(f"{options.script}: resumes exactly")


if __name__ == "__main__":
    main()
