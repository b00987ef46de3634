"""Tests specific to ppo_continuous.py: the diagonal Gaussian policy, unclipped action storage,
the observation and reward normalisers, truncation inside a real rollout, checkpoints that carry
the normalisation, and that a MuJoCo task is learned. The math and the command line are tested
for every script in test_math.py and test_cli_and_runs.py."""

import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TICK_LIMIT, TickEnv, assert_policy_equals_library, evaluate_checkpoint, read_saved, run_script, short_args

import ppo_continuous as ppo
import tooling


def test_gaussian_log_prob_and_entropy_match_closed_form(module=ppo):
    torch.manual_seed(0)
    agent = module.Agent(3, 2)
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([0.3, -0.7]))
    obs = torch.randn(5, 3)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == (5, 2) and logprob.shape == entropy.shape == value.shape == (5,)
    mu, sigma = agent.actor(obs).detach(), torch.tensor([math.exp(0.3), math.exp(-0.7)])
    # log N(a; μ, σ²) = −(a−μ)²/(2σ²) − log σ − ½ log 2π, summed over the 2 dimensions
    expected = (-((action - mu) ** 2) / (2 * sigma**2) - sigma.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    torch.testing.assert_close(logprob.detach(), expected)
    # H = Σ_i ½ log(2πe σ_i²), the same in every state
    expected_entropy = sum(0.5 * math.log(2 * math.pi * math.e * s**2) for s in sigma.tolist())
    torch.testing.assert_close(entropy.detach(), torch.full((5,), expected_entropy))


def test_written_out_gaussian_equals_torch_distributions_bit_for_bit(module=ppo):
    torch.manual_seed(0)
    agent = module.Agent(3, 2)
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([0.3, -0.7]))
    obs = torch.randn(64, 3)

    def library_dist():
        mean = agent.actor(obs)
        return torch.distributions.Normal(mean, agent.actor_logstd.expand_as(mean).exp())

    assert_policy_equals_library(lambda o, a: agent.get_action_and_value(o, a)[:3], library_dist, obs,
                                 list(agent.actor.parameters()) + [agent.actor_logstd], continuous=True)


def test_initial_policy_mean_is_near_zero_with_unit_std(module=ppo):
    agent = module.Agent(4, 3)
    assert agent.actor(torch.randn(100, 4)).abs().max() < 0.1
    assert torch.equal(agent.actor_logstd, torch.zeros(3))


def test_running_mean_std_matches_numpy_over_batches(module=ppo):
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 4))
    rms = module.RunningMeanStd((4,))
    for batch in np.split(data, [1, 7, 300, 301, 999]):
        rms.update(batch)
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-6)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-3)  # the tiny initial count (1e-4) biases it a hair


def test_reward_scale_is_std_of_discounted_return_reset_at_episode_end(module=ppo):
    scaler = module.RewardScaler(num_envs=1, gamma=0.5)
    rewards, dones = [1.0, 1.0, 1.0, 1.0], [False, True, False, False]
    discounted = []
    for r, d in zip(rewards, dones, strict=True):
        scaled = scaler.scale(np.array([r]), np.array([d]))
        discounted.append(1.0 if not discounted or dones[len(discounted) - 1] else 0.5 * discounted[-1] + 1.0)
        # the pooled variance of every R so far and the prior (mean 0, var 1, weight 1e-4)
        x, n = np.array(discounted), len(discounted) + 1e-4
        mean = x.sum() / n
        expected_var = (1e-4 * (1 + mean**2) + ((x - mean) ** 2).sum()) / n
        np.testing.assert_allclose(scaled, [min(r / math.sqrt(expected_var + 1e-8), 10)], rtol=1e-6)
    assert discounted == [1.0, 1.5, 1.0, 1.5]  # R restarts after the episode ended at step 2


def test_rewards_that_are_all_zero_scale_to_zero(module=ppo):
    """An env that pays nothing for long: the variance of R falls below 1e-8, which the 1e-8 in
    √(Var[R] + 1e-8) keeps from 0, so the scaled rewards stay 0 (not 0/0)."""
    scaler = module.RewardScaler(num_envs=1000, gamma=0.99)
    for _ in range(100):
        scaled = scaler.scale(np.zeros(1000), np.zeros(1000, dtype=bool))
    assert scaler.return_rms.var < 1e-8 and np.array_equal(scaled, np.zeros(1000))


def test_observation_normalisation_and_clip(module=ppo):
    agent = module.Agent(obs_dim=2, act_dim=1)
    out = agent.normalize_obs(np.array([[0.0, 10.0], [2.0, 30.0]]))  # mean (1, 20), std (1, 10)
    np.testing.assert_allclose(out, [[-1.0, -1.0], [1.0, 1.0]], rtol=1e-3)
    frozen = agent.normalize_obs(np.array([[100.0, 20.0]]), update=False)
    np.testing.assert_allclose(frozen, [[10.0, 0.0]], atol=1e-3)  # 99 clipped to 10
    np.testing.assert_allclose(agent.obs_rms.mean, [1.0, 20.0], rtol=1e-3)  # unchanged when frozen
    assert np.array_equal(module.Agent(2, 1, norm_obs=False).normalize_obs(out), out)  # --no-norm-obs
    # a feature that never changes: its variance falls below 1e-8, which the 1e-8 keeps from 0
    constant = module.Agent(obs_dim=1, act_dim=1)
    out = constant.normalize_obs(np.full((100_000, 1), 3.0))
    assert constant.obs_rms.var[0] < 1e-8 and np.isfinite(out).all() and np.abs(out).max() < 1e-3


def test_stored_action_is_the_unclipped_sample(monkeypatch, log_dir):
    """The env receives clip(a); the update re-evaluates log π of the sample a itself."""
    sampled, sent, updated = [], [], []

    class RecordingAgent(ppo.Agent):
        def get_action_and_value(self, obs, action=None):
            out = super().get_action_and_value(obs, action)
            (sampled if action is None else updated).append(out[0].detach().clone())
            return out

    real_make_vec_env = ppo.make_vec_env

    def recording_make_vec_env(env_id, num_envs):
        envs = real_make_vec_env(env_id, num_envs)
        real_step = envs.step
        envs.step = lambda action: (sent.append(np.array(action)), real_step(action))[1]
        return envs

    monkeypatch.setattr(ppo, "Agent", RecordingAgent)
    monkeypatch.setattr(ppo, "make_vec_env", recording_make_vec_env)
    tooling.main(ppo, short_args(ppo, log_dir, env_id="TickContinuous-v0", num_steps=64, num_minibatches=1, update_epochs=1,
                         total_timesteps=64))
    samples = torch.cat(sampled[:64]).numpy()  # the rollout's 64 samples (σ = 1: many leave [−1, 1])
    assert (np.abs(samples) > 1).sum() > 10
    np.testing.assert_allclose(np.concatenate(sent), np.clip(samples, -1, 1), rtol=1e-6)
    stored = torch.cat(updated).numpy()  # the one minibatch of the one epoch: the whole batch, shuffled
    np.testing.assert_allclose(np.sort(stored, axis=0), np.sort(samples, axis=0), rtol=1e-6)


def record_first_rollout(monkeypatch, log_dir, **overrides) -> dict:
    """Train one 12-step iteration of 2 TickContinuous envs (truncated at step 5 and 10) and
    return what the first rollout handed on: the observations the policy acted on, the raw ones
    the envs returned, the inputs of GAE, the final observations (raw, normalised) the normaliser
    saw without updating, and, under the critic of that rollout, V of each normalised final
    observation and V of the raw final observation (L, 1)."""
    seen = {"acted_on": [], "raw": [], "agents": [], "final_obs": []}
    real_make_vec_env, real_gae, real_obs = ppo.make_vec_env, ppo.compute_gae, ppo.Agent.normalize_obs

    class RecordingAgent(ppo.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            seen["agents"].append(self)

        def get_action_and_value(self, obs, action=None):
            if action is None:  # acting in the rollout, not re-evaluating in the update
                seen["acted_on"].append(obs.clone())
            return super().get_action_and_value(obs, action)

    def recording_make_vec_env(env_id, num_envs):
        envs = real_make_vec_env(env_id, num_envs)
        real_reset, real_step = envs.reset, envs.step
        envs.reset = lambda **kw: (out := real_reset(**kw), seen["raw"].append(out[0].copy()))[0]
        envs.step = lambda a: (out := real_step(a), seen["raw"].append(out[0].copy()))[0]
        return envs

    def recording_obs(self, obs, update=True):
        out = real_obs(self, obs, update)
        if not update and "rewards" not in seen:  # a final observation of the first rollout
            seen["final_obs"].append((obs.copy(), out.copy()))
        return out

    def spy_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
        if "rewards" not in seen:
            with torch.no_grad():  # the critic before this iteration's update, as in the rollout
                critic = seen["agents"][0].get_value
                final_value = critic(torch.tensor([[float(TICK_LIMIT), 1.0]]))
                final_values = [critic(torch.tensor(n, dtype=torch.float32)) for _, n in seen["final_obs"]]
            seen.update(rewards=rewards.clone(), values=values.clone(), next_values=next_values.clone(),
                        terminations=terminations.clone(), truncations=truncations.clone(),
                        raw_final_value=final_value, final_values=final_values)
        return real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)

    monkeypatch.setattr(ppo, "Agent", RecordingAgent)
    monkeypatch.setattr(ppo, "make_vec_env", recording_make_vec_env)
    monkeypatch.setattr(ppo.Agent, "normalize_obs", recording_obs)
    monkeypatch.setattr(ppo, "compute_gae", spy_gae)
    tooling.main(ppo, short_args(ppo, log_dir, env_id="TickContinuous-v0", num_envs=2, num_steps=12, num_minibatches=2,
                         total_timesteps=24, **overrides))
    monkeypatch.undo()  # so that the next run records afresh
    seen["acted_on"] = torch.stack(seen["acted_on"][:12])  # (T, N, obs_dim)
    seen["raw"] = torch.tensor(np.stack(seen["raw"][:12]), dtype=torch.float32)
    return seen


def test_rollout_bootstraps_truncation_with_normalised_final_observation(monkeypatch, log_dir):
    """Inside a real training run: at a time-limit truncation, V(s_{t+1}) handed to GAE is the
    critic's value of the real final observation (t = L), normalised with the running statistics;
    elsewhere it is the value of the next stored observation; nothing counts as terminated."""
    seen = record_first_rollout(monkeypatch, log_dir)
    assert seen["terminations"].sum() == 0 and seen["truncations"].sum() == 4  # steps 5 and 10 of both envs
    assert len(seen["final_obs"]) == 2
    for raw, normalised in seen["final_obs"]:
        np.testing.assert_array_equal(raw, [[TICK_LIMIT, 1.0], [TICK_LIMIT, 1.0]])  # the real final obs
        assert not np.allclose(normalised, raw)  # ... passed through the normaliser
    next_values, values = seen["next_values"], seen["values"]
    for k, t in enumerate([TICK_LIMIT - 1, 2 * TICK_LIMIT - 1]):
        torch.testing.assert_close(next_values[t], seen["final_values"][k])
    inside = seen["truncations"][:-1] == 0
    torch.testing.assert_close(next_values[:-1][inside], values[1:][inside])


def test_no_norm_obs_gives_the_networks_raw_observations_and_changes_nothing_else(monkeypatch, log_dir):
    """--no-norm-obs (an ablation): the policy acts on, and the critic bootstraps from, the raw
    observations; the rewards are scaled as by default."""
    default = record_first_rollout(monkeypatch, log_dir)
    raw = record_first_rollout(monkeypatch, log_dir, norm_obs=False)
    assert torch.equal(raw["acted_on"], raw["raw"])
    assert not torch.allclose(default["acted_on"], default["raw"])  # the default normalises them
    cut = raw["truncations"].bool()
    torch.testing.assert_close(raw["next_values"][cut], raw["raw_final_value"].expand(4))  # V of (L, 1) itself
    assert torch.equal(raw["rewards"], default["rewards"])


def test_no_norm_reward_learns_from_raw_rewards_and_changes_nothing_else(monkeypatch, log_dir):
    """--no-norm-reward (an ablation): GAE gets the env's rewards as they are (1 at every step of
    TickEnv); the observations are normalised as by default, so the same seed acts the same."""
    default = record_first_rollout(monkeypatch, log_dir)
    raw = record_first_rollout(monkeypatch, log_dir, norm_reward=False)
    assert torch.equal(raw["rewards"], torch.ones(12, 2))
    assert not torch.allclose(default["rewards"], torch.ones(12, 2))  # the default scales them
    assert torch.equal(raw["acted_on"], default["acted_on"])


def test_no_norm_obs_checkpoint_is_evaluated_on_raw_observations(log_dir, capsys):
    """A checkpoint of a --no-norm-obs run is evaluated as it was trained, on raw observations:
    --eval-checkpoint prints the line the evaluation after training printed, whatever
    statistics the checkpoint holds."""
    result = tooling.main(ppo, short_args(ppo, log_dir, norm_obs=False, save_model=True, eval_episodes=2))
    after_training = capsys.readouterr().out.strip().splitlines()[-1]
    path = os.path.join(result["run_dir"], "model.pt")
    checkpoint = read_saved(path, weights_only=True)  # statistics that would change every action
    checkpoint["model"]["_extra_state"][0] += 5.0
    tooling.write(checkpoint, str(path))  # sealed again, as the script writes
    evaluate_checkpoint(ppo, path)
    assert capsys.readouterr().out.strip().splitlines()[-1] == after_training


def test_checkpoint_restores_policy_and_normalisation(log_dir, monkeypatch):
    """A loaded checkpoint acts exactly as the trained agent did, normalisation included, and a
    user can evaluate it from the command line, with video."""
    result = tooling.main(ppo, short_args(ppo, log_dir, save_model=True, eval_episodes=2))
    path = os.path.join(result["run_dir"], "model.pt")
    checkpoint = read_saved(path, weights_only=True)
    live = result["agent"].obs_rms
    assert checkpoint["args"]["env_id"] == "Pendulum-v1" and live.count > 2048
    assert np.array_equal(checkpoint["model"]["_extra_state"].numpy(), np.array([live.mean, live.var]))
    # the evaluation from the checkpoint repeats the one after training, which a change of the
    # saved statistics would change
    assert evaluate_checkpoint(ppo, path) == result["eval_returns"]
    checkpoint["model"]["_extra_state"][0] += 1.0
    tooling.write(checkpoint, str(path))  # sealed again, as the script writes
    assert evaluate_checkpoint(ppo, path) != result["eval_returns"]
    cli = run_script("ppo_continuous.py", "--eval-checkpoint", path, "--eval-episodes", "1", "--capture-video")
    assert cli.returncode == 0, cli.stderr
    assert "Pendulum-v1: mean return" in cli.stdout
    assert any(v.endswith(".mp4") for v in os.listdir(os.path.join(result["run_dir"], "videos")))


@pytest.mark.parametrize("space,message", [
    (gym.spaces.Box(-1, 1, (2, 2), np.float32), "needs a flat Box"),
    (gym.spaces.MultiDiscrete([2, 3]), "needs a flat Box"),
])
def test_unsupported_action_space_is_refused(space, message, monkeypatch):
    env = TickEnv(continuous=True)
    env.action_space = space
    monkeypatch.setattr(ppo.gym, "make", lambda *args, **kwargs: env)
    with pytest.raises(SystemExit, match=message):
        tooling.check_args(ppo, tooling.run_args(ppo)(env_id="TickContinuous-v0"))


def test_learns_inverted_pendulum(log_dir):
    """InvertedPendulum-v4 with the default hyperparameters and a 120k-step budget: the mean of the
    last 20 training episodes passes 500 (the maximum is 1000). Fails when the advantage's sign is
    flipped."""
    result = tooling.main(ppo, tooling.run_args(ppo)(env_id="InvertedPendulum-v4", total_timesteps=120_000, log_dir=log_dir,
                                                     eval_episodes=3))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= 500, last_20
