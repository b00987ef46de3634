"""Tests specific to ppo_discrete.py: the Categorical policy, checkpoints, and that CartPole is
learned. The math, the command line and truncation in a rollout are tested for several scripts
at once in test_math.py, test_cli_and_runs.py and test_truncation.py."""

import math
import os

import numpy as np
import pytest
import torch
from conftest import assert_policy_equals_library, read_saved, run_script, short_args

import ppo_discrete as ppo
import tooling


def test_agent_shapes_and_initial_policy_is_near_uniform(module=ppo):
    agent = module.Agent(4, 3)
    action, logprob, entropy, value = agent.get_action_and_value(torch.randn(7, 4))
    assert action.shape == logprob.shape == entropy.shape == value.shape == (7,)
    # the 0.01-scaled policy head makes the first policy almost uniform: H ≈ log 3
    assert entropy.mean().item() == pytest.approx(math.log(3), abs=1e-3)


def test_written_out_categorical_equals_torch_distributions_bit_for_bit(module=ppo):
    torch.manual_seed(0)
    agent = module.Agent(4, 3)
    with torch.no_grad():
        agent.actor[-1].weight.mul_(300)  # a clearly non-uniform policy
    obs = torch.randn(64, 4)
    assert_policy_equals_library(lambda o, a: agent.get_action_and_value(o, a)[:3],
                                 lambda: torch.distributions.Categorical(logits=agent.actor(obs)),
                                 obs, list(agent.actor.parameters()), continuous=False)


def test_checkpoint_loads_with_weights_only_and_acts_the_same(log_dir):
    result = tooling.main(ppo, short_args(ppo, log_dir, total_timesteps=1024, save_model=True))
    path = os.path.join(result["run_dir"], "model.pt")
    checkpoint = read_saved(path, weights_only=True)
    assert checkpoint["args"]["env_id"] == "CartPole-v1" and checkpoint["global_step"] == 1024
    for key, weight in result["agent"].state_dict().items():  # the actor's and the critic's
        assert torch.equal(checkpoint["model"][key], weight), key
    # ... and a user can evaluate it from the command line, with a video of each episode
    cli = run_script("ppo_discrete.py", "--eval-checkpoint", path, "--eval-episodes", "2", "--capture-video")
    assert cli.returncode == 0, cli.stderr
    assert "CartPole-v1: mean return" in cli.stdout
    videos = os.listdir(os.path.join(result["run_dir"], "videos"))
    assert len([v for v in videos if v.endswith(".mp4")]) == 2


def test_learns_cartpole_with_default_hyperparameters(log_dir):
    """The defaults, unchanged, solve CartPole-v1 (mean of the last 20 episodes ≥ 475) within their
    own 500k-step budget. About 1.5 minutes here. Fails when the advantage's sign is flipped."""
    result = tooling.main(ppo, tooling.run_args(ppo)(log_dir=log_dir, eval_episodes=5))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= 475, last_20
    assert np.mean(result["eval_returns"]) >= 475
