"""Extension points a researcher can trust: loop state read back by name, a resume that refuses a
checkpoint of other state names, tools/resume_check.py, and a tooling that uses the agent only
through `greedy_action`."""

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, SCRIPTS, _module, read_saved, short_args

import tooling

# Short runs on classic control (envs that a checkpoint saves), a few updates each.
CHECK_FLAGS = {
    "reinforce": ["--batch-size", "1000", "--total-timesteps", "6000"],
    "vpg": ["--num-steps", "256", "--vf-iters", "5", "--total-timesteps", "6144"],
    "trpo": ["--num-steps", "256", "--vf-iters", "5", "--total-timesteps", "6144"],
    "ppo_discrete": ["--total-timesteps", "4096"],
    "ppo_recurrent": ["--total-timesteps", "2048", "--update-epochs", "2"],
    "ppo_atari": ["--env-id", "MinAtar/Breakout-v1", "--total-timesteps", "3072"],
    "ppo_continuous": ["--env-id", "Pendulum-v1", "--num-steps", "512", "--num-minibatches", "8",
                       "--update-epochs", "2", "--total-timesteps", "4096"],
}


def resume_check(script, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "resume_check.py"), str(script), *flags],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONWARNINGS="ignore"))


def copy_with(tmp_path, name: str, new_name: str, *edits: tuple[str, str]):
    """A copy of a script, named new_name.py, with each (old, new) text edit made once."""
    source = (ROOT / f"{name}.py").read_text()
    for old, new in edits:
        assert source.count(old) >= 1, old
        source = source.replace(old, new, 1)
    path = tmp_path / f"{new_name}.py"
    path.write_text(source)
    return path


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_resumes_exactly(name):
    out = resume_check(ROOT / f"{name}.py", *CHECK_FLAGS[name])
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == f"{ROOT / name}.py: resumes exactly", \
        out.stdout[-2000:] + out.stderr[-2000:]


def test_resume_check_names_the_state_that_a_resume_loses(tmp_path):
    """The trial's case: an EMA of the critic, updated every iteration and used for the bootstrap,
    but left out of state(). A resumed run restarts it from the initial critic."""
    path = copy_with(tmp_path, "ppo_discrete", "ema_ppo",
                     ("    optimizer = torch.optim.Adam(",
                      "    ema_critic = copy.deepcopy(agent.critic)\n    optimizer = torch.optim.Adam("),
                     ("            next_value = agent.get_value(next_obs)",
                      "            next_value = ema_critic(next_obs).squeeze(-1)"),
                     ("        # --- log: every loss",
                      "        with torch.no_grad():\n"
                      "            for e, p in zip(ema_critic.parameters(), agent.critic.parameters()):\n"
                      "                e.mul_(0.9).add_(p, alpha=0.1)\n\n        # --- log: every loss"),
                     ("import functools\n", "import copy\nimport functools\n"))
    out = resume_check(path, "--total-timesteps", "4096")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith(f"{path}: does not resume exactly; the runs part in update 5 of 8, the first "
                           "after the resume: loop state that state() does not name"), line
    # where the runs first part: the state's key, the index, and both values
    assert re.search(r"The first value that differs: state\(\)\['agent'\]\['[\w.]+'\](\[\d+\])+: \S+ against \S+ "
                     r"\(resumed against uninterrupted\)$", line), line


def test_resume_check_names_random_numbers_that_a_checkpoint_does_not_save(tmp_path):
    """The minibatch order drawn from NumPy's global generator, which `train` seeds only at its
    start: a resumed run draws again the numbers of the first updates."""
    path = copy_with(tmp_path, "ppo_discrete", "numpy_ppo",
                     ("            b_inds = torch.randperm(batch_size, device=device)",
                      "            b_inds = torch.from_numpy(np.random.permutation(batch_size))"))
    out = resume_check(path, "--total-timesteps", "4096")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    assert ("the runs part in update 5 of 8, the first after the resume: random numbers drawn from "
            "Python's or NumPy's global generator") in line, line


def test_loop_state_is_read_back_by_name_not_position(tmp_path):
    """state() written in another order resumes exactly: train reads the state back by name (by
    position, this order swaps the optimiser and the agent)."""
    path = copy_with(tmp_path, "ppo_discrete", "swapped_ppo",
                     ('        return {"agent": agent, "optimizer": optimizer,',
                      '        return {"optimizer": optimizer, "agent": agent,'))
    out = resume_check(path, "--total-timesteps", "4096")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_checkpoint_of_other_state_names_is_refused(name, tmp_path, capsys):
    module = _module(name)
    run_dir = tooling.main(module, short_args(module, str(tmp_path), checkpoint_every=1))["run_dir"]
    path = f"{run_dir}/checkpoint.pt"
    content = read_saved(path, weights_only=False)
    content["state"]["ema_critic"] = content["state"].pop("episodic_returns")
    tooling.write(content, path)  # the script's own writer seals the envelope again
    with pytest.raises(SystemExit) as stop:
        tooling.main(module, tooling.run_args(module)(resume=path, total_timesteps=content["args"]["total_timesteps"] * 2))
    assert "['ema_critic', 'episodic_returns']" in str(stop.value) and str(stop.value).count("\n") == 0, stop.value
    assert str(stop.value).startswith(f"{name}.py: error: --resume:")


def test_the_tooling_uses_the_agent_only_through_greedy_action():
    """In tooling.py, an agent's attributes are those of every torch module (parameters,
    state_dict, ...), greedy_action, or sampled_action (--eval-sampled): never its layers."""
    tooling = ast.parse((ROOT / "tooling.py").read_text())
    module_api = {"parameters", "state_dict", "load_state_dict", "cpu", "greedy_action", "sampled_action"}
    used = set()
    for node in ast.walk(tooling):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Subscript) and isinstance(owner.slice, ast.Constant):
                owner = owner.slice.value  # state["agent"]
            elif isinstance(owner, ast.Name):
                owner = owner.id
            if owner == "agent":
                used.add(node.attr)
    assert used and used <= module_api, used - module_api


def test_a_changed_agent_needs_no_tooling_change(tmp_path):
    """The trial's case: Agent's actor renamed and given another layer. Training ends with its
    evaluation, and --eval-checkpoint evaluates the model.pt, with the tooling unchanged."""
    source = (ROOT / "ppo_discrete.py").read_text()
    algorithm = source.replace("self.actor", "self.policy_net").replace(
        "self.policy_net = mlp(obs_dim, hidden_size, n_actions, out_std=0.01)",
        "self.policy_net = nn.Sequential(nn.Linear(obs_dim, obs_dim), nn.Tanh(),\n"
        "                                        mlp(obs_dim, hidden_size, n_actions, out_std=0.01))")
    assert "nn.Sequential(nn.Linear(obs_dim, obs_dim)" in algorithm
    path = tmp_path / "layered_ppo.py"
    path.write_text(algorithm)
    shutil.copy(ROOT / "tooling.py", tmp_path)  # tooling.py unchanged, beside the changed script
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, str(path), "--total-timesteps", "2048", "--save-model", "--eval-episodes", "2",
                          "--log-dir", str(tmp_path / "runs")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "mean return" in out.stdout, out.stderr
    (model,) = (tmp_path / "runs").glob("*/model.pt")
    out = subprocess.run([sys.executable, str(path), "--eval-checkpoint", str(model), "--eval-episodes", "2"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "mean return" in out.stdout, out.stderr
