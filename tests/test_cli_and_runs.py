"""What every script must do the same way for its user: a --help that documents every flag,
bad input refused in seconds with one line, reproducible runs, the TensorBoard tags, and a
clean Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, SCRIPTS, SHORT_RUNS, run_script, short_args

import tooling

PATHS = [name + ".py" for name in SCRIPTS]
# Phrases of --help that show the algorithm's own flags are explained, with their paper symbols.
HELP_PHRASES = {
    "ppo_discrete.py": ["discount factor γ", "GAE λ", "ε of the clipped surrogate", "Adam step size α", "minibatches per epoch"],
    "ppo_continuous.py": ["discount factor γ", "GAE λ", "ε of the clipped surrogate", "normalise observations"],
    "vpg.py": ["discount factor γ", "GAE λ", "Adam step size α of the policy", "steps on the critic"],
    "trpo.py": ["discount factor γ", "GAE λ", "δ, the trust region", "added to the Fisher matrix"],
    "reinforce.py": ["discount factor γ", "Adam step size α of the policy", "complete episodes"],
    "ppo_recurrent.py": ["discount factor γ", "GAE λ", "ε of the clipped surrogate", "minibatches per epoch"],
    "ppo_atari.py": ["discount factor γ", "GAE λ", "ε of the clipped surrogate", "decay the clip ε"],
}


@pytest.mark.parametrize("path", PATHS)
def test_help_documents_every_flag(path):
    import importlib

    module = importlib.import_module(path[:-3])
    result = run_script(path, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for field in tooling.run_args(module).__dataclass_fields__:
        assert "--" + field.replace("_", "-") in text, field
    for phrase in HELP_PHRASES[path]:
        assert phrase in text, phrase


@pytest.mark.parametrize("path", PATHS)
def test_help_texts_have_no_line_breaks(path):
    """tyro prints a flag's docstring as written: a line break inside it would show in --help."""
    import ast

    (args,) = [n for n in ast.parse((ROOT / path).read_text()).body if getattr(n, "name", "") == "Args"]
    texts = [n.value.value for n in args.body if isinstance(n, ast.Expr)]
    assert len(texts) == len([n for n in args.body if isinstance(n, ast.AnnAssign)])
    assert all("\n" not in text for text in texts)


BAD_INPUT = [
    # (flags, message): the same rules in every script ...
    (["--env-id", "CartPole-v9"], "It provides versioned environments: [ `v0`, `v1` ]"),  # Gymnasium's words
    (["--num-envs", "0"], "--num-envs"),
    (["--learning-rate", "-1e-3"], "--learning-rate"),
    (["--gamma", "1.5"], "--gamma"),
    (["--hidden-size", "0"], "--hidden-size must be finite and positive"),
    (["--checkpoint-every", "-1"], "--checkpoint-every must be finite and >= 0"),
    (["--total-timesteps", "100"], "--total-timesteps 100 is less than one batch"),  # which check
    (["--eval-checkpoint", "no/such/model.pt"], "No such file"),
]
# ... plus each script's own: the PPO scripts point to each other for the action space they do not
# handle, and every script refuses observations that are not a flat vector (FrozenLake: a Discrete
# one, which FlattenObservation makes a one-hot vector; ppo_continuous.py refuses its Discrete
# actions first).
OWN_BAD_INPUT = [
    ("ppo_discrete.py", ["--env-id", "Pendulum-v1"], "use ppo_continuous.py"),
    ("ppo_continuous.py", ["--env-id", "CartPole-v1"], "use ppo_discrete.py"),
    ("ppo_discrete.py", ["--num-minibatches", "7"], "--num-minibatches 7 does not divide the batch"),
    ("ppo_continuous.py", ["--num-minibatches", "7"], "--num-minibatches 7 does not divide the batch"),
    ("ppo_discrete.py", ["--num-envs", "1", "--num-steps", "4", "--num-minibatches", "4"], "--norm-adv needs minibatches"),
    ("ppo_continuous.py", ["--num-steps", "64", "--num-minibatches", "64"], "--norm-adv needs minibatches"),
    ("vpg.py", ["--vf-iters", "0"], "--vf-iters"),
    ("trpo.py", ["--cg-damping", "0"], "--cg-damping"),
    ("trpo.py", ["--max-kl", "-0.01"], "--max-kl"),
    ("reinforce.py", ["--batch-size", "0"], "--batch-size"),
    ("ppo_atari.py", ["--env-id", "CartPole-v1"], "the script takes images, (H, W, C): for vectors use ppo_discrete.py"),
    ("ppo_atari.py", ["--env-id", "FrozenLake-v1"], "has observations Discrete(16); the script takes images"),
    ("ppo_atari.py", ["--num-minibatches", "7"], "--num-minibatches 7 does not divide the batch"),
    ("ppo_atari.py", ["--sticky-actions", "1"], "--sticky-actions must lie in [0, 1)"),  # help: [0, 1)
    ("ppo_atari.py", ["--sticky-actions", "-0.1"], "--sticky-actions must be finite and >= 0"),
] + [(p, ["--env-id", "FrozenLake-v1"], "wrap the env in gym.wrappers.FlattenObservation(env)")
       for p in PATHS if p not in ("ppo_continuous.py", "ppo_atari.py")]


# (trpo.py has no --learning-rate: δ takes its place. ppo_atari.py has no --hidden-size: its
# networks are those of their papers.)
@pytest.mark.parametrize("path,flags,message", [(p, f, m) for p in PATHS for f, m in BAD_INPUT
                                                if (p, f[0]) not in [("trpo.py", "--learning-rate"),
                                                                     ("ppo_atari.py", "--hidden-size")]]
                         + OWN_BAD_INPUT)
def test_bad_input_fails_fast_with_one_line(path, flags, message, tmp_path):
    result = run_script(path, *flags, "--log-dir", str(tmp_path), timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "error" in lines[0], result.stderr
    assert not os.listdir(tmp_path)  # nothing was started


def test_same_seed_same_run_other_seed_other_run(script, log_dir):
    first = tooling.main(script, short_args(script, log_dir))
    second = tooling.main(script, short_args(script, log_dir))
    other = tooling.main(script, short_args(script, log_dir, seed=2))
    assert len(first["episodic_returns"]) >= 8
    assert first["episodic_returns"] == second["episodic_returns"]
    for p, q in zip(first["agent"].parameters(), second["agent"].parameters(), strict=True):
        assert torch.equal(p, q)
    assert first["episodic_returns"] != other["episodic_returns"]


PPO_TAGS = {"charts/learning_rate", "losses/value_loss", "losses/old_approx_kl", "losses/clipfrac",
            "losses/explained_variance"}
OWN_TAGS = {"ppo_discrete": PPO_TAGS | {"losses/policy_loss"}, "ppo_continuous": PPO_TAGS | {"losses/policy_loss"},
            "vpg": {"losses/policy_loss", "losses/value_loss", "losses/explained_variance"},
            "reinforce": {"losses/policy_loss", "charts/batch_fraction"},
            "trpo": {"losses/kl", "losses/backtracks", "losses/value_loss",
                     "losses/explained_variance"},
            "ppo_recurrent": PPO_TAGS | {"losses/policy_loss"}, "ppo_atari": PPO_TAGS | {"losses/policy_loss"}}


def test_tensorboard_logs_every_tag(script, log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = short_args(script, log_dir, eval_episodes=2)
    result = tooling.main(script, args)
    events = EventAccumulator(result["run_dir"])
    events.Reload()
    # trpo.py logs the exact KL as losses/kl, and no estimate: approx_kl names an estimate.
    kl = "losses/kl" if script.__name__ == "trpo" else "losses/approx_kl"
    expected = {"charts/episodic_return", "charts/episodic_length", "charts/SPS",
                "losses/entropy", kl, "eval/episodic_return"} | OWN_TAGS[script.__name__]
    assert expected <= set(events.Tags()["scalars"])
    assert (script.__name__ == "trpo") == ("losses/approx_kl" not in events.Tags()["scalars"])
    if script.__name__ != "reinforce":  # its batches are whole episodes, so their number varies
        updates = args.total_timesteps // (args.num_envs * args.num_steps)
        assert len(events.Scalars(kl)) == updates  # one value per update
    assert "hyperparameters/text_summary" in events.Tags()["tensors"]


def start_and_wait_for_first_update(path: str, tmp_path, *flags) -> subprocess.Popen:
    """Start a default run of `path` that saves its model; return once it printed its first line
    (after the first update)."""
    # SIGINT as at a terminal: a test run started in the background (`pytest &`) would otherwise
    # pass on an ignored SIGINT to the script.
    proc = subprocess.Popen([sys.executable, str(ROOT / path), "--save-model", "--log-dir", str(tmp_path), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first_line = proc.stdout.readline()
    if path == "ppo_atari.py":  # Its first line says what it made of the env, before training.
        first_line = proc.stdout.readline()
    assert first_line.startswith("step"), first_line
    return proc


@pytest.mark.parametrize("path,checkpoints", [(p, c) for p in PATHS for c in (True, False)])
def test_ctrl_c_stops_at_once_and_leaves_the_last_checkpoint(path, checkpoints, tmp_path):
    """Ctrl-C stops the run at once: exit 130, no traceback, one line that says how to go on with
    --resume where the run has a checkpoint, and that nothing was saved where it has none (with
    --checkpoint-every 0). The run's files are
    those of its last checkpoint: its logs reach that update (the first, here)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = start_and_wait_for_first_update(path, tmp_path, "--checkpoint-every", "1" if checkpoints else "0")
    while checkpoints and not list(tmp_path.glob("*/checkpoint.pt")):  # written after the line
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "checkpoint.pt").exists() == (run_dir / "model.pt").exists() == checkpoints
    assert "Traceback" not in err and err.strip().splitlines()[-1] == f"{path}: interrupted in training; " + (
        f"--resume {run_dir}/checkpoint.pt goes on from its last checkpoint" if checkpoints else "saved: nothing"), err
    if checkpoints:
        events = EventAccumulator(str(run_dir))
        events.Reload()
        assert events.Scalars("charts/SPS")  # the checkpointed update's scalars reached the file


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_run_prints_no_python_warning(name, tmp_path):
    """A user's run, with Python's default warning filters, prints no warning of ours (a tensor that
    needs a gradient turned into a number, a deprecation) between its progress lines."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SHORT_RUNS[name].items()]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run([sys.executable, str(ROOT / f"{name}.py"), *flags, f"--log-dir={tmp_path}",
                          "--checkpoint-every=1"], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr
