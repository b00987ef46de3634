"""Tests specific to reinforce.py and vpg.py: rewards-to-go, the two losses, VPG's value targets,
REINFORCE's batches of complete episodes, both policy heads (trpo.py's too, the same code),
checkpoints, and that CartPole is learned. GAE, the command line, determinism and TensorBoard are tested for every script in
test_math.py and test_cli_and_runs.py."""

import math
import os
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import TickEnv, assert_policy_equals_library, nearly_equal_like, read_saved, run_script, short_args

import reinforce
import tooling
import trpo
import vpg


def naive_rewards_to_go(rewards, dones, gamma):
    """G_t = Σ_k γ^{k−t} r_k for k from t to the end of t's episode, as an explicit double loop."""
    returns = np.zeros(len(rewards))
    for t in range(len(rewards)):
        for k in range(t, len(rewards)):
            returns[t] += gamma ** (k - t) * rewards[k]
            if dones[k]:
                break
    return returns


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_rewards_to_go_match_double_loop_and_never_cross_an_episode(gamma, module=reinforce):
    rng = np.random.default_rng(0)
    lengths = [1, 4, 7, 2, 9]
    dones = np.concatenate([[0.0] * (n - 1) + [1.0] for n in lengths])
    rewards = rng.normal(size=len(dones))
    returns = module.compute_returns(torch.tensor(rewards, dtype=torch.float32), torch.tensor(dones, dtype=torch.float32),
                                        gamma)
    np.testing.assert_allclose(returns.numpy(), naive_rewards_to_go(rewards, dones, gamma), rtol=1e-5, atol=1e-5)
    ends = np.flatnonzero(dones)
    np.testing.assert_allclose(returns.numpy()[ends], rewards[ends], rtol=1e-6)  # G = r at every last step


def test_reinforce_loss_by_hand(module=reinforce):
    """L = −(1/B) Σ log π(a_t|s_t) G_t, so ∂L/∂log π(a_t|s_t) = −G_t / B."""
    logprob = torch.tensor([math.log(0.5), math.log(0.25)], requires_grad=True)
    loss = module.reinforce_loss(logprob, torch.tensor([2.0, -1.0]))
    assert loss.item() == pytest.approx(-(math.log(0.5) * 2.0 - math.log(0.25)) / 2)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([-1.0, 0.5]))


def test_vpg_losses_by_hand(module=vpg):
    logprob = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    loss = module.vpg_loss(logprob, torch.tensor([1.0, -1.0, 3.0]))
    assert loss.item() == pytest.approx(-(-1.0 + 2.0 - 1.5) / 3)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([-1.0, 1.0, -3.0]) / 3)
    # (V − R̂)² averaged: ((1−3)² + (0−0)²) / 2 = 2, no ½ factor (as in Spinning Up)
    assert module.value_loss(torch.tensor([1.0, 0.0]), torch.tensor([3.0, 0.0])).item() == pytest.approx(2.0)


@pytest.mark.parametrize("module", [vpg, trpo], ids=["vpg", "trpo"])
def test_value_loss_by_hand(module):
    """The critic's loss, (V − R̂)² averaged over the batch, and its gradient 2(V − R̂)/B."""
    value = torch.tensor([1.0, 0.0, -1.0], requires_grad=True)
    loss = module.value_loss(value, torch.tensor([3.0, 0.0, 1.0]))
    assert loss.item() == pytest.approx((4.0 + 0.0 + 4.0) / 3)
    loss.backward()
    torch.testing.assert_close(value.grad, torch.tensor([-4.0, 0.0, -4.0]) / 3)


def test_vpg_value_targets_bootstrap_cut_and_truncated_paths_but_not_terminated_ones():
    """R̂_t are GAE's returns with λ = 1: the discounted rewards-to-go, plus γ^k V(s_{t+k}) where the
    path was cut (by the batch end or by a time limit), plus nothing after a termination. One env,
    T = 6, γ = 0.5, every reward 1: a path truncated at t = 1 (V(final obs) = 8), a path terminated
    at t = 3, and a path cut by the batch end after t = 5 (V(s_T) = 4)."""
    rewards = torch.ones(6, 1)
    values = torch.full((6, 1), 100.0)  # what the critic thinks now cancels out of R̂ = A + V
    terminations = torch.tensor([[0.0], [0.0], [0.0], [1.0], [0.0], [0.0]])
    truncations = torch.tensor([[0.0], [1.0], [0.0], [0.0], [0.0], [0.0]])
    next_values = torch.tensor([[100.0], [8.0], [100.0], [100.0], [100.0], [4.0]])
    _, returns = vpg.compute_gae(rewards, values, next_values, terminations, truncations, 0.5, 1.0)
    expected = [1 + 0.5 * (1 + 0.5 * 8), 1 + 0.5 * 8, 1 + 0.5, 1.0, 1 + 0.5 * (1 + 0.5 * 4), 1 + 0.5 * 4]
    np.testing.assert_allclose(returns[:, 0].numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("batch_size", [1, 300])
def test_reinforce_batch_holds_whole_episodes_and_finishes_every_one_begun(batch_size, monkeypatch, log_dir):
    """Inside a real run on CartPole (reward 1 per step; with γ = 1 a step's G_t counts the steps
    left in its episode, 1 at its last): the returns that reach the loss are exactly those of the
    logged episodes, each whole and once (an episode of length L gives G = L, L − 1, ..., 1),
    at least batch_size steps per batch. With batch_size = 1 the first episode to end fills the
    batch, yet the episodes the other envs had begun are still played out: 4 episodes a batch."""
    batches, real_loss = [], reinforce.reinforce_loss
    monkeypatch.setattr(reinforce, "reinforce_loss", lambda lp, g: (batches.append(g.clone()), real_loss(lp, g))[1])
    result = tooling.main(reinforce, short_args(reinforce, log_dir, num_envs=4, batch_size=batch_size, gamma=1.0,
                                        total_timesteps=1500))
    for returns in batches:
        assert len(returns) >= batch_size and (batch_size > 1 or (returns == 1).sum() == 4)
    lengths = [int(r) for _, r in result["episodic_returns"]]
    expected = sorted(g for length in lengths for g in range(1, length + 1))
    assert sorted(torch.cat(batches).int().tolist()) == expected and len(lengths) > 4


@pytest.mark.parametrize("module", [reinforce, vpg, trpo])
def test_gaussian_head_sums_log_probs_over_action_dimensions(module):
    agent = module.Agent(3, gym.spaces.Box(-1, 1, (2,)))
    with torch.no_grad():
        agent.actor_logstd.copy_(torch.tensor([0.3, -0.2]))
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    logprob, entropy = module_policy(module, agent, obs, action)
    mean, std = agent.actor(obs), agent.actor_logstd.exp()
    expected = (-((action - mean) ** 2) / (2 * std**2) - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
    torch.testing.assert_close(logprob, expected)
    torch.testing.assert_close(entropy, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).sum().expand(5))


def module_policy(module, agent, obs, action):
    """(log π(a|s), H) from a script's agent: vpg's and trpo's method also returns the action and V."""
    out = agent.get_action(obs, action) if hasattr(agent, "get_action") else agent.get_action_and_value(obs, action)
    return out[1], out[2]


@pytest.mark.parametrize("module", [reinforce, vpg, trpo])
@pytest.mark.parametrize("continuous", [False, True])
def test_written_out_policies_equal_torch_distributions_bit_for_bit(module, continuous):
    torch.manual_seed(0)
    agent = module.Agent(3, gym.spaces.Box(-1, 1, (4,)) if continuous else gym.spaces.Discrete(4))
    with torch.no_grad():
        agent.actor[-1].weight.mul_(100)  # a clearly non-uniform policy
    obs = torch.randn(64, 3)

    def library_dist():
        out = agent.actor(obs)
        if continuous:
            return torch.distributions.Normal(out, agent.actor_logstd.exp().expand_as(out))
        return torch.distributions.Categorical(logits=out)

    def policy(o, a):
        return agent.get_action(o, a) if hasattr(agent, "get_action") else agent.get_action_and_value(o, a)[:3]

    params = list(agent.actor.parameters()) + ([agent.actor_logstd] if continuous else [])
    assert_policy_equals_library(policy, library_dist, obs, params, continuous)


@pytest.mark.parametrize("module", [reinforce, vpg])
def test_unsupported_action_space_is_refused(module, monkeypatch):
    env = TickEnv()
    env.action_space = gym.spaces.MultiDiscrete([2, 3])
    monkeypatch.setattr(module.gym, "make", lambda *args, **kwargs: env)
    with pytest.raises(SystemExit, match=re.escape("needs Discrete(n) or a flat Box")):
        tooling.check_args(module, tooling.run_args(module)(env_id="TickDiscrete-v0"))


@pytest.mark.parametrize("module", [reinforce, vpg])
def test_box_actions_run_and_checkpoint_round_trips(module, log_dir):
    """A short run on Pendulum-v1 (Box actions): the saved policy, loaded with weights_only, gives
    the same mean actions and log-std, and evaluates the same from the command line."""
    result = tooling.main(module, short_args(module, log_dir, env_id="Pendulum-v1", save_model=True, eval_episodes=1))
    assert np.isfinite(result["eval_returns"]).all() and len(result["episodic_returns"]) >= 1
    path = os.path.join(result["run_dir"], "model.pt")
    checkpoint = read_saved(path, weights_only=True)
    assert checkpoint["args"]["env_id"] == "Pendulum-v1"
    for key, weight in result["agent"].state_dict().items():  # the log-std too
        assert torch.equal(checkpoint["model"][key], weight), key
    cli = run_script(f"{module.__name__}.py", "--eval-checkpoint", path, "--eval-episodes", "1")
    assert cli.returncode == 0, cli.stderr
    assert f"Pendulum-v1: mean return {result['eval_returns'][0]:.2f}" in cli.stdout


# Measured here (seed 1): reinforce.py's defaults reach a last-20 mean of ~490 by 250k steps;
# vpg.py with --learning-rate 1e-3 reaches ~450 by 400k. With the sign of G_t or Â_t flipped,
# both stay near 10, the return of pushing the cart one way.
LEARNING = {
    "reinforce": (dict(total_timesteps=300_000), 400),
    "vpg": (dict(total_timesteps=400_000, learning_rate=1e-3), 300),
}


@pytest.mark.parametrize("module", [reinforce, vpg])
def test_learns_cartpole(module, log_dir):
    """About a minute and a half each here."""
    overrides, threshold = LEARNING[module.__name__]
    result = tooling.main(module, tooling.run_args(module)(log_dir=log_dir, eval_episodes=0, **overrides))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= threshold, last_20


def test_vpg_critic_regresses_on_lambda_one_returns_and_actor_gets_lambda_advantages(monkeypatch, log_dir):
    """Inside a real run: the critic's targets are GAE's returns with λ = 1 (the bootstrapped
    rewards-to-go, as in Spinning Up), and the policy's advantages those with the run's λ,
    normalised over the batch."""
    gae_inputs, targets, policy_advantages = [], [], []
    real_gae, real_value_loss, real_vpg_loss = vpg.compute_gae, vpg.value_loss, vpg.vpg_loss

    def spy_gae(*args):
        gae_inputs.append([a.clone() if torch.is_tensor(a) else a for a in args])
        return real_gae(*args)

    monkeypatch.setattr(vpg, "compute_gae", spy_gae)
    monkeypatch.setattr(vpg, "value_loss", lambda v, r: (targets.append(r.clone()), real_value_loss(v, r))[1])
    monkeypatch.setattr(vpg, "vpg_loss", lambda lp, a: (policy_advantages.append(a.clone()), real_vpg_loss(lp, a))[1])
    # Tick: every episode is cut by the time limit at step 5, so the targets must stop there too
    tooling.main(vpg, short_args(vpg, log_dir, env_id="TickDiscrete-v0", num_envs=2, total_timesteps=24, num_steps=12,
                                 vf_iters=2))
    rewards, values, next_values, terminations, truncations, gamma, gae_lambda = gae_inputs[0][:7]
    assert gae_lambda == 0.97 and truncations.sum() == 4
    _, expected_targets = real_gae(rewards, values, next_values, terminations, truncations, gamma, 1.0)
    torch.testing.assert_close(targets[0], expected_targets.reshape(-1))
    advantages, _ = real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)
    a = advantages.reshape(-1)
    torch.testing.assert_close(policy_advantages[0], (a - a.mean()) / (a.std() + 1e-8))


def test_reinforce_norm_returns_flag(monkeypatch, log_dir):
    """--norm-returns hands the loss G_t standardised over the batch; without it, G_t unchanged.
    The first batch, collected before any update, is the same with and without the flag."""
    seen, real_loss = {}, reinforce.reinforce_loss
    for norm_returns in (False, True):
        monkeypatch.setattr(reinforce, "reinforce_loss",
                            lambda lp, g, k=norm_returns: (seen.setdefault(k, g.clone()), real_loss(lp, g))[1])
        tooling.main(reinforce, short_args(reinforce, log_dir, total_timesteps=1000, norm_returns=norm_returns))
    raw = seen[False]
    assert raw.min() > 0.5  # CartPole's rewards-to-go, unnormalised
    torch.testing.assert_close(seen[True], (raw - raw.mean()) / (raw.std() + 1e-8))


@pytest.mark.parametrize("name", ["reinforce", "vpg", "trpo"])
def test_a_batch_of_nearly_equal_weights_is_normalised_without_blowing_up(name, monkeypatch, log_dir):
    """The 1e-8 in (x − mean) / (std + 1e-8) is added: a batch whose returns (reinforce.py) or
    advantages (vpg.py, trpo.py) spread by less than 1e-8 comes out bounded and in its order,
    where a subtracted 1e-8 would flip and inflate it."""
    module, seen = {"reinforce": reinforce, "vpg": vpg, "trpo": trpo}[name], []

    if name == "reinforce":
        monkeypatch.setattr(module, "compute_returns", lambda *a: nearly_equal_like(a[0]))
        real_loss = module.reinforce_loss
        monkeypatch.setattr(module, "reinforce_loss", lambda lp, g: (seen.append(g.clone()), real_loss(lp, g))[1])
        flags = dict(total_timesteps=1000, norm_returns=True)
    else:
        real_gae = module.compute_gae
        monkeypatch.setattr(module, "compute_gae",  # nearly equal advantages; λ = 1 (the targets) as it is
                            lambda *a: (nearly_equal_like(a[0]), real_gae(*a)[1]) if a[6] != 1.0 else real_gae(*a))
        if name == "vpg":
            real_loss = module.vpg_loss
            monkeypatch.setattr(module, "vpg_loss", lambda lp, adv: (seen.append(adv.clone()), real_loss(lp, adv))[1])
        else:
            real_step = module.trpo_step
            monkeypatch.setattr(module, "trpo_step", lambda ag, p, o, ac, adv, args: (seen.append(adv.clone()),
                                                                                     real_step(ag, p, o, ac, adv, args))[1])
        flags = dict(total_timesteps=24, num_envs=2, num_steps=12, vf_iters=2)
    tooling.main(module, short_args(module, log_dir, **flags))
    weights = seen[0]
    assert torch.isfinite(weights).all() and weights.abs().max() < 1 and weights[-1] > weights[0], weights


@pytest.mark.parametrize("module", [reinforce, vpg])
def test_logged_approx_kl_is_k3_between_the_policy_before_and_after_the_step(module, monkeypatch, log_dir):
    """losses/approx_kl of an update is k3 = mean[(r − 1) − log r], r = π_θ(a|s) / π_old(a|s), over
    the batch: the log-probabilities of the stored actions before the step and after it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    evaluated = []  # log π of the batch's actions, each time the update evaluates them
    act = "get_action"

    class RecordingAgent(module.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            real = getattr(self, act)

            def recording(obs, action=None):
                out = real(obs, action)
                if action is not None:
                    evaluated.append(out[1].detach().clone())
                return out

            setattr(self, act, recording)

    monkeypatch.setattr(module, "Agent", RecordingAgent)
    result = tooling.main(module, short_args(module, log_dir, total_timesteps=1024, **({} if module is reinforce else
                                                                              {"num_steps": 256, "vf_iters": 2})))
    events = EventAccumulator(result["run_dir"])
    events.Reload()
    logged = events.Scalars("losses/approx_kl")[0].value
    old, new = evaluated[0], evaluated[1]
    logratio = new - old
    assert logged > 0 and logged == pytest.approx(((logratio.exp() - 1) - logratio).mean().item(), rel=1e-5)
