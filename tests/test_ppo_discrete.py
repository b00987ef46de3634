"""Tests of ppo_discrete.py: each formula against a reference worked out independently, the
command line as a user meets it, reproducibility, checkpoints, and that CartPole is learned."""

import math
import os
import signal
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import ROOT, TICK_LIMIT, naive_gae, random_rollout, run_script

import ppo_discrete as ppo

# --------------------------------------------------------------------------------------------
# GAE
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma,gae_lambda", [(0.99, 0.95), (0.9, 0.5), (1.0, 1.0)])
def test_gae_matches_naive_sum(gamma, gae_lambda):
    data = random_rollout()
    advantages, returns = ppo.compute_gae(**data, gamma=gamma, gae_lambda=gae_lambda)
    expected = naive_gae(**{k: v.numpy() for k, v in data.items()}, gamma=gamma, gae_lambda=gae_lambda)
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns.numpy(), expected + data["values"].numpy(), rtol=1e-5, atol=1e-5)


def test_gae_lambda_one_is_monte_carlo_return_minus_value():
    """λ = 1: A_t = Σ_k γ^{k-t} r_k (+ γ^{..} V(bootstrap)) − V(s_t), the discounted return to
    the episode's end, bootstrapped only where the episode was cut (the TD errors telescope when
    V(s_{t+1}) is the same number in δ_t and δ_{t+1}, as in a real rollout)."""
    data = random_rollout(T=30, N=2, seed=1, consistent=True)
    gamma = 0.97
    advantages, _ = ppo.compute_gae(**data, gamma=gamma, gae_lambda=1.0)
    r, v, nv = data["rewards"].numpy(), data["values"].numpy(), data["next_values"].numpy()
    term, trunc = data["terminations"].numpy(), data["truncations"].numpy()
    T, N = r.shape
    for n in range(N):
        G = 0.0  # return from the end of the rollout backwards
        for t in reversed(range(T)):
            if term[t, n]:
                G = r[t, n]
            elif trunc[t, n] or t == T - 1:
                G = r[t, n] + gamma * nv[t, n]
            else:
                G = r[t, n] + gamma * G
            assert advantages[t, n].item() == pytest.approx(G - v[t, n], abs=1e-4)


def test_gae_lambda_zero_is_one_step_td_error():
    data = random_rollout(seed=2)
    gamma = 0.9
    advantages, _ = ppo.compute_gae(**data, gamma=gamma, gae_lambda=0.0)
    td = data["rewards"] + gamma * (1 - data["terminations"]) * data["next_values"] - data["values"]
    torch.testing.assert_close(advantages, td)


def test_gae_truncation_bootstraps_and_termination_does_not():
    one = torch.ones(1, 1)
    zero = torch.zeros(1, 1)
    kwargs = dict(rewards=one, values=zero, next_values=10 * one, gamma=0.5, gae_lambda=0.9)
    terminated, _ = ppo.compute_gae(terminations=one, truncations=zero, **kwargs)
    truncated, _ = ppo.compute_gae(terminations=zero, truncations=one, **kwargs)
    assert terminated.item() == pytest.approx(1.0)  # r, no future
    assert truncated.item() == pytest.approx(1.0 + 0.5 * 10)  # r + γ V(final obs)


def test_gae_recursion_stops_at_episode_end():
    """Step 0 ends an episode (truncated); step 1 belongs to the next one and must not leak into A_0."""
    rewards = torch.tensor([[0.0], [100.0]])
    values = torch.zeros(2, 1)
    next_values = torch.tensor([[2.0], [0.0]])
    for terminations, truncations, expected in [([[0.0], [0.0]], [[1.0], [0.0]], 1.0), ([[1.0], [0.0]], [[0.0], [0.0]], 0.0)]:
        adv, _ = ppo.compute_gae(rewards, values, next_values, torch.tensor(terminations), torch.tensor(truncations), 0.5, 1.0)
        assert adv[0, 0].item() == pytest.approx(expected)


def test_rollout_bootstraps_truncation_with_final_observation(monkeypatch, log_dir):
    """Inside a real training run: at a time-limit truncation, the V(s_{t+1}) handed to GAE is the
    critic's value of the real final observation (t = L), not of the reset observation; elsewhere
    it is the value of the next stored observation; nothing ever counts as terminated."""
    agents, seen, real_gae = [], [], ppo.compute_gae

    class RecordingAgent(ppo.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            agents.append(self)

    def spy_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
        with torch.no_grad():
            final_value = agents[0].get_value(torch.tensor([float(TICK_LIMIT), 1.0])).item()
            reset_value = agents[0].get_value(torch.tensor([0.0, 1.0])).item()
        seen.append((values.clone(), next_values.clone(), terminations.clone(), truncations.clone(), final_value, reset_value))
        return real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)

    monkeypatch.setattr(ppo, "Agent", RecordingAgent)
    monkeypatch.setattr(ppo, "compute_gae", spy_gae)
    args = ppo.Args(env_id="TickDiscrete-v0", num_envs=2, num_steps=12, num_minibatches=2, total_timesteps=24,
                    eval_episodes=0, log_dir=log_dir)
    ppo.train(args)
    values, next_values, terminations, truncations, final_value, reset_value = seen[0]
    assert terminations.sum() == 0
    assert truncations[TICK_LIMIT - 1].tolist() == [1.0, 1.0] and truncations.sum() == 4  # steps 5 and 10
    assert final_value != pytest.approx(reset_value)
    for t in range(11):
        for n in range(2):
            if truncations[t, n]:
                assert next_values[t, n].item() == pytest.approx(final_value, abs=1e-6)
            else:
                assert next_values[t, n].item() == pytest.approx(values[t + 1, n].item(), abs=1e-6)


# --------------------------------------------------------------------------------------------
# The PPO loss, on inputs worked out by hand
# --------------------------------------------------------------------------------------------


def loss_terms(new_logprob, advantages, clip_coef=0.2, **overrides):
    """ppo_loss with the value and entropy terms switched off, so only the surrogate remains."""
    new_logprob = torch.tensor(new_logprob, requires_grad=True)
    n = len(advantages)
    kwargs = dict(new_logprob=new_logprob, old_logprob=torch.zeros(n), advantages=torch.tensor(advantages),
                  new_value=torch.zeros(n), old_value=torch.zeros(n), returns=torch.zeros(n), entropy=torch.zeros(n),
                  clip_coef=clip_coef, clip_vloss=True, ent_coef=0.0, vf_coef=0.0)
    kwargs.update(overrides)
    loss, stats = ppo.ppo_loss(**kwargs)
    loss.backward()
    return loss.item(), new_logprob.grad, stats


@pytest.mark.parametrize(
    "ratio,advantage,expected_loss,expected_grad",
    [
        # (ratio r, Â) -> −min(r Â, clip(r) Â) and its derivative w.r.t. log π = −Â r where not clipped
        (1.5, 2.0, -2.4, 0.0),  # r > 1+ε with Â > 0: clipped at 1.2·2, no gradient
        (1.5, -2.0, 3.0, 3.0),  # r > 1+ε with Â < 0: the unclipped, worse term is kept
        (0.5, 2.0, -1.0, -1.0),  # r < 1−ε with Â > 0: unclipped term kept
        (0.5, -2.0, 1.6, 0.0),  # r < 1−ε with Â < 0: clipped at 0.8·(−2), no gradient
        (1.1, 2.0, -2.2, -2.2),  # inside the trust region: plain r Â
    ],
)
def test_clipped_surrogate_by_hand(ratio, advantage, expected_loss, expected_grad):
    loss, grad, _ = loss_terms([math.log(ratio)], [advantage])
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    assert grad.item() == pytest.approx(expected_grad, abs=1e-6)


def test_surrogate_is_mean_over_samples_and_at_ratio_one_its_gradient_is_minus_advantage_over_n():
    loss, grad, stats = loss_terms([0.0, 0.0, 0.0], [1.0, -2.0, 4.0])
    assert loss == pytest.approx(-1.0)
    torch.testing.assert_close(grad, torch.tensor([-1.0, 2.0, -4.0]) / 3)
    assert stats["clipfrac"].item() == 0.0 and stats["approx_kl"].item() == 0.0


def value_loss(new, old, returns, clip_vloss):
    n = torch.zeros(1)
    _, stats = ppo.ppo_loss(n, n, n, torch.tensor([new]), torch.tensor([old]), torch.tensor([returns]), n,
                            clip_coef=0.2, clip_vloss=clip_vloss, ent_coef=0.0, vf_coef=1.0)
    return stats["value_loss"].item()


def test_value_loss_by_hand():
    # V_old = 0, V = 1, R = 2: unclipped (1−2)² = 1; clipped V = 0.2, (0.2−2)² = 3.24; ½·max = 1.62
    assert value_loss(1.0, 0.0, 2.0, clip_vloss=True) == pytest.approx(1.62)
    # V_old = 0, V = 1, R = 0.5: unclipped 0.25, clipped (0.2−0.5)² = 0.09; ½·max = 0.125
    assert value_loss(1.0, 0.0, 0.5, clip_vloss=True) == pytest.approx(0.125)
    assert value_loss(1.0, 0.0, 2.0, clip_vloss=False) == pytest.approx(0.5)


def test_total_loss_combines_terms_with_their_signs():
    """L = L_pg + c₁ L_V − c₂ H: the entropy is a bonus (lowers the loss), the value error a cost."""
    logp, adv = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 3.0])
    entropy, new_v, ret = torch.tensor([0.5, 0.7]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 1.0])
    loss, stats = ppo.ppo_loss(logp, logp, adv, new_v, new_v, ret, entropy, 0.2, False, ent_coef=0.1, vf_coef=0.5)
    # L_pg = −mean(Â) = −2; L_V = ½·mean((1−3)², 0) = 1; H = 0.6
    assert stats["policy_loss"].item() == pytest.approx(-2.0)
    assert stats["value_loss"].item() == pytest.approx(1.0)
    assert stats["entropy"].item() == pytest.approx(0.6)
    assert loss.item() == pytest.approx(-2.0 + 0.5 * 1.0 - 0.1 * 0.6)


def test_kl_estimators_and_clipfrac_by_hand():
    log_r = [math.log(1.5), math.log(0.9)]
    _, _, stats = loss_terms(log_r, [1.0, 1.0])
    k1 = -(log_r[0] + log_r[1]) / 2
    k3 = ((1.5 - 1 - log_r[0]) + (0.9 - 1 - log_r[1])) / 2
    assert stats["old_approx_kl"].item() == pytest.approx(k1, rel=1e-5)
    assert stats["approx_kl"].item() == pytest.approx(k3, rel=1e-5)
    assert stats["clipfrac"].item() == pytest.approx(0.5)  # only r = 1.5 lies outside [0.8, 1.2]


def test_agent_shapes_and_initial_policy_is_near_uniform():
    agent = ppo.Agent(4, 3)
    action, logprob, entropy, value = agent.get_action_and_value(torch.randn(7, 4))
    assert action.shape == logprob.shape == entropy.shape == value.shape == (7,)
    # the 0.01-scaled policy head makes the first policy almost uniform: H ≈ log 3
    assert entropy.mean().item() == pytest.approx(math.log(3), abs=1e-3)


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def test_help_documents_every_flag():
    result = run_script("ppo_discrete.py", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for field in ppo.Args.__dataclass_fields__:
        assert "--" + field.replace("_", "-") in text, field
    for phrase in ["discount factor γ", "GAE λ", "ε of the clipped surrogate", "Adam step size α", "minibatches per epoch"]:
        assert phrase in text


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env-id", "CartPole-v9"], "did you mean CartPole-v1"),
        (["--env-id", "Pendulum-v1"], "use ppo_continuous.py"),
        (["--num-minibatches", "3"], "does not split into 3 minibatches"),
        (["--num-envs", "0"], "--num-envs must be a positive integer"),
        (["--learning-rate", "-1e-3"], "--learning-rate must be positive"),
        (["--gamma", "1.5"], "--gamma must lie in [0, 1]"),
        (["--total-timesteps", "100"], "less than one batch"),
        (["--eval-checkpoint", "no/such/model.pt"], "no such file"),
    ],
)
def test_bad_input_fails_fast_with_one_line(flags, message, tmp_path):
    result = run_script("ppo_discrete.py", *flags, "--log-dir", str(tmp_path), timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not os.listdir(tmp_path)  # nothing was started


# --------------------------------------------------------------------------------------------
# Reproducibility, checkpoints, interruption
# --------------------------------------------------------------------------------------------


def short_args(log_dir, **overrides):
    return replace(ppo.Args(total_timesteps=4096, eval_episodes=0, log_dir=log_dir), **overrides)


def test_same_seed_same_run_other_seed_other_run(log_dir):
    first = ppo.train(short_args(log_dir))
    second = ppo.train(short_args(log_dir))
    other = ppo.train(short_args(log_dir, seed=2))
    assert len(first["episodic_returns"]) > 50
    assert first["episodic_returns"] == second["episodic_returns"]
    for p, q in zip(first["agent"].parameters(), second["agent"].parameters(), strict=True):
        assert torch.equal(p, q)
    assert first["episodic_returns"] != other["episodic_returns"]


def test_tensorboard_logs_every_tag(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = ppo.train(short_args(log_dir, total_timesteps=1024, eval_episodes=2))
    events = EventAccumulator(result["run_dir"])
    events.Reload()
    expected = {"charts/episodic_return", "charts/episodic_length", "charts/learning_rate", "charts/SPS",
                "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/old_approx_kl",
                "losses/approx_kl", "losses/clipfrac", "losses/explained_variance", "eval/episodic_return"}
    assert expected <= set(events.Tags()["scalars"])
    assert len(events.Scalars("losses/value_loss")) == 2  # one mean per update
    assert "hyperparameters/text_summary" in events.Tags()["tensors"]


def test_checkpoint_loads_with_weights_only_and_acts_the_same(log_dir):
    result = ppo.train(short_args(log_dir, total_timesteps=1024, save_model=True))
    path = os.path.join(result["run_dir"], "model.pt")
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint["args"]["env_id"] == "CartPole-v1" and checkpoint["global_step"] == 1024
    loaded, _ = ppo.load_checkpoint(path, torch.device("cpu"))
    obs = torch.randn(16, 4)
    torch.testing.assert_close(loaded.actor(obs), result["agent"].actor(obs))
    torch.testing.assert_close(loaded.get_value(obs), result["agent"].get_value(obs))
    # ... and a user can evaluate it from the command line, with a video of each episode
    cli = run_script("ppo_discrete.py", "--eval-checkpoint", path, "--eval-episodes", "2", "--capture-video")
    assert cli.returncode == 0, cli.stderr
    assert "CartPole-v1: mean return" in cli.stdout
    videos = os.listdir(os.path.join(result["run_dir"], "videos"))
    assert len([v for v in videos if v.endswith(".mp4")]) == 2


def test_ctrl_c_flushes_logs_saves_model_and_exits_cleanly(tmp_path):
    proc = subprocess.Popen([sys.executable, str(ROOT / "ppo_discrete.py"), "--save-model", "--log-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    first_line = proc.stdout.readline()  # printed after the first update
    assert first_line.startswith("step"), first_line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err and "interrupted at step" in err
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "model.pt").exists()
    assert any(f.name.startswith("events.out.tfevents") and f.stat().st_size > 0 for f in run_dir.iterdir())


# --------------------------------------------------------------------------------------------
# Learning
# --------------------------------------------------------------------------------------------


def test_learns_cartpole_with_default_hyperparameters(log_dir):
    """The defaults, unchanged, solve CartPole-v1 (mean of the last 20 episodes ≥ 475) within their
    own 500k-step budget. About 1.5 minutes here."""
    result = ppo.train(ppo.Args(log_dir=log_dir, eval_episodes=5))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= 475, last_20
    assert np.mean(result["eval_returns"]) >= 475
