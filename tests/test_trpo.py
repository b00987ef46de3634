"""trpo.py's own pieces: the closed-form KL, the Fisher-vector product against an explicit Fisher
matrix, conjugate gradient against a direct solve, the line search, the trust region kept in a
real run, and learning. (The exact policy-gradient check is in test_exact_gradient.py; the CLI,
guard-rail and checkpoint tests run on every script, trpo.py included.)"""

import copy
import types

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import short_args
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tooling
import trpo


def tiny_agent(continuous: bool, module=trpo) -> trpo.Agent:
    """A float64 policy small enough for an explicit Fisher matrix: 3 inputs, 4 hidden units,
    3 actions or 2 action dimensions."""
    torch.manual_seed(0)
    space = gym.spaces.Box(-1, 1, (2,)) if continuous else gym.spaces.Discrete(3)
    agent = module.Agent(3, space, hidden_size=4).double()
    with torch.no_grad():  # an actor further from its near-zero start, so that the test sees it
        for name, p in agent.named_parameters():
            if name.startswith("actor"):
                p.add_(0.5 * torch.randn_like(p))
    return agent


def policy_params(agent):
    return [p for name, p in agent.named_parameters() if not name.startswith("critic")]


def flat(grads):
    return torch.cat([g.reshape(-1) for g in grads])


def explicit_fisher(agent, obs):
    """F = mean over the states of E_{a~π(·|s)}[∇log π(a|s) ∇log π(a|s)ᵀ], (n, n), built
    without the KL: by enumerating the actions of a Categorical, and for a Gaussian from its
    Fisher matrix in (μ_j, log σ_j), diag(1/σ_j², 2), and the Jacobians of μ and log σ."""
    params = policy_params(agent)
    fisher = 0
    for s in obs:
        if agent.continuous:
            mean, logstd = agent.actor(s[None])[0], agent.actor_logstd
            for j in range(len(mean)):
                g_mean = flat(torch.autograd.grad(mean[j], params, retain_graph=True, allow_unused=True,
                                                  materialize_grads=True))
                g_logstd = flat(torch.autograd.grad(logstd[j], params, retain_graph=True, allow_unused=True,
                                                    materialize_grads=True))
                fisher = fisher + torch.outer(g_mean, g_mean) / (2 * logstd[j]).exp().detach()
                fisher = fisher + 2 * torch.outer(g_logstd, g_logstd)
        else:
            log_pi = torch.log_softmax(agent.actor(s[None])[0], -1)
            for a in range(len(log_pi)):
                g = flat(torch.autograd.grad(log_pi[a], params, retain_graph=True))
                fisher = fisher + log_pi[a].exp().detach() * torch.outer(g, g)
    return fisher / len(obs)


@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "gaussian"])
def test_mean_kl_is_the_closed_form_of_torch_distributions(continuous):
    agent, obs = tiny_agent(continuous), torch.randn(7, 3, dtype=torch.float64)
    old = copy.deepcopy(agent)
    assert trpo.mean_kl(agent, obs, old).abs() < 1e-12  # 0 at θ_old
    with torch.no_grad():
        for p in policy_params(agent):
            p.add_(0.3 * torch.randn_like(p))
    D = torch.distributions
    with torch.no_grad():
        if continuous:
            expected = D.kl_divergence(D.Normal(old.actor(obs), old.actor_logstd.exp()),
                                       D.Normal(agent.actor(obs), agent.actor_logstd.exp())).sum(-1).mean()
        else:
            expected = D.kl_divergence(D.Categorical(logits=old.actor(obs)), D.Categorical(logits=agent.actor(obs))).mean()
    torch.testing.assert_close(trpo.mean_kl(agent, obs, old), expected)


@pytest.mark.parametrize("continuous", [False, True], ids=["categorical", "gaussian"])
def test_fisher_vector_product_is_the_explicit_fisher_matrix_times_v_plus_damping(continuous, module=trpo):
    agent, obs = tiny_agent(continuous, module), torch.randn(5, 3, dtype=torch.float64)
    params = policy_params(agent)
    fisher = explicit_fisher(agent, obs)
    n = sum(p.numel() for p in params)
    assert fisher.shape == (n, n)
    generator = torch.Generator().manual_seed(1)
    for damping in (0.0, 0.1):
        fvp = module.fisher_vector_product(module.mean_kl(agent, obs, copy.deepcopy(agent)), params, damping)
        for _ in range(3):
            v = torch.randn(n, dtype=torch.float64, generator=generator)
            product = fvp(v)
            torch.testing.assert_close(product, fisher @ v + damping * v, rtol=1e-8, atol=1e-10)


def test_conjugate_gradient_solves_a_positive_definite_system(module=trpo):
    generator = torch.Generator().manual_seed(0)
    m = torch.randn(12, 12, dtype=torch.float64, generator=generator)
    a = m @ m.T + 0.5 * torch.eye(12, dtype=torch.float64)  # symmetric positive definite
    b = torch.randn(12, dtype=torch.float64, generator=generator)
    exact = torch.linalg.solve(a, b)
    x = module.conjugate_gradient(lambda v: a @ v, b, iters=12)  # n steps: exact
    torch.testing.assert_close(x, exact, rtol=1e-6, atol=1e-8)
    # Fewer steps approximate: the error in the A-norm never grows with the steps
    errors = [((y := module.conjugate_gradient(lambda v: a @ v, b, iters=k)) - exact) @ a @ (y - exact)
              for k in range(1, 13)]
    assert all(e2 <= e1 * (1 + 1e-9) for e1, e2 in zip(errors, errors[1:], strict=False))
    assert errors[-1] < 1e-8 * errors[0]


def toy_line_search(acceptable, iters=10):
    """The line search on one weight θ from 0 along a full step of 1 (θ_k = 0.8^k), with
    acceptable(θ) in place of trpo_step's test; returns the final θ and k."""
    theta = torch.nn.Parameter(torch.zeros(1))
    k = trpo.line_search([theta], torch.ones(1), lambda: acceptable(theta.detach()[0].item()), 0.8, iters)
    return theta.detach()[0].item(), k


def test_line_search_takes_the_first_acceptable_step_or_none():
    theta, k = toy_line_search(lambda t: t**2 <= 0.3)
    assert k == 3 and theta == pytest.approx(0.8**3)  # 1, 0.64, 0.41 are rejected; 0.26 is not
    theta, k = toy_line_search(lambda t: False)
    assert theta == 0.0 and k == 10  # nothing accepted: θ_old is kept


def batch(seed=0):
    """A fixed batch for one update of a 2-action policy: action 1 pays where obs₀ > 0."""
    torch.manual_seed(seed)
    agent = trpo.Agent(4, gym.spaces.Discrete(2))
    obs, actions = torch.randn(512, 4), torch.randint(0, 2, (512,))
    advantages = torch.randn(512) + obs[:, 0] * (2 * actions - 1)
    return agent, obs, actions, advantages


ARGS = types.SimpleNamespace(max_kl=1e-3, cg_damping=0.1)


@pytest.mark.parametrize("broken", ["kl", "surrogate"])
def test_trpo_step_rejects_steps_that_break_the_kl_bound_or_lower_the_surrogate(broken, monkeypatch):
    """The line search's test is trpo_step's: made to see, for the first 3 steps it tries, a KL
    above δ (or a surrogate below L(θ_old)), the update backtracks 3 times and takes the 4th."""
    agent, obs, actions, advantages = batch()
    calls, real = [0], getattr(trpo, "mean_kl" if broken == "kl" else "surrogate")

    def spoiled(*a):
        value = real(*a)
        if not torch.is_grad_enabled():  # a call of the line search's test
            calls[0] += 1
            if calls[0] <= 3:
                return value + 1.0 if broken == "kl" else value - 1.0
        return value

    monkeypatch.setattr(trpo, "mean_kl" if broken == "kl" else "surrogate", spoiled)
    stats = trpo.trpo_step(agent, policy_params(agent), obs, actions, advantages, ARGS)
    assert stats["backtracks"] == 3


def test_surrogate_by_hand():
    """L = mean of r_t Â_t with r_t = exp(log π − log π_old), and ∂L/∂log π_t = r_t Â_t / B: the
    ratio itself, not the log-ratio, weighs the advantages (the two agree only at r = 1)."""
    logprob = torch.tensor([np.log(2.0), np.log(0.5), 0.0], dtype=torch.float32, requires_grad=True)
    loss = trpo.surrogate(logprob, torch.zeros(3), torch.tensor([1.0, 3.0, -2.0]))
    assert loss.item() == pytest.approx((2.0 * 1.0 + 0.5 * 3.0 + 1.0 * -2.0) / 3)
    loss.backward()
    torch.testing.assert_close(logprob.grad, torch.tensor([2.0, 1.5, -2.0]) / 3)


def test_the_step_length_is_set_by_delta_not_by_the_scale_of_the_advantages():
    """The full step is x scaled to the model's edge, √(2δ / xᵀ(H + cI)x)·x: advantages 10 times
    larger make g and x 10 times larger and the scale 10 times smaller, so the same update."""
    agent, obs, actions, advantages = batch()
    updated = []
    for scale in (1.0, 10.0):
        copy_ = copy.deepcopy(agent)
        stats = trpo.trpo_step(copy_, policy_params(copy_), obs, actions, scale * advantages, ARGS)
        assert stats["backtracks"] == 0 and 0.5e-3 < stats["kl"] <= 1e-3
        updated.append(torch.cat([p.detach().reshape(-1) for p in policy_params(copy_)]))
    torch.testing.assert_close(updated[0], updated[1], rtol=1e-4, atol=1e-6)


def test_trpo_step_moves_to_the_edge_of_the_region_and_improves_the_surrogate():
    """One update on a fixed batch: the measured KL is within δ and, with the line search's
    first step accepted, close to δ (the quadratic model is good for a small δ); the surrogate
    rises."""
    agent, obs, actions, advantages = batch()
    old = copy.deepcopy(agent)
    before = trpo.surrogate(old.get_action(obs, actions)[1], old.get_action(obs, actions)[1],
                            advantages)
    stats = trpo.trpo_step(agent, policy_params(agent), obs, actions, advantages, ARGS)
    with torch.no_grad():
        measured = trpo.mean_kl(agent, obs, old).item()
        after = trpo.surrogate(agent.get_action(obs, actions)[1], old.get_action(obs, actions)[1],
                               advantages)
    assert stats["backtracks"] == 0 and after > before
    assert measured == pytest.approx(stats["kl"]) and 0.5e-3 < measured <= 1e-3


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_every_update_stays_inside_the_trust_region(env_id, log_dir):
    """In a real run, the measured mean KL of every update (losses/kl) is within δ, and most
    updates move (a step was accepted)."""
    result = tooling.main(trpo, short_args(trpo, log_dir, env_id=env_id, total_timesteps=8192, max_kl=0.005))
    events = EventAccumulator(result["run_dir"])
    events.Reload()
    kls = [e.value for e in events.Scalars("losses/kl")]
    backtracks = [e.value for e in events.Scalars("losses/backtracks")]
    assert len(kls) == 8192 // 1024 and max(kls) <= 0.005
    assert sum(b < 10 for b in backtracks) >= len(kls) // 2 and sum(k > 0 for k in kls) >= len(kls) // 2


# Measured here (seed 1): the defaults reach a last-20 mean of 500 by 80k steps on CartPole-v1.
def test_learns_cartpole(log_dir):
    result = tooling.main(trpo, tooling.run_args(trpo)(log_dir=log_dir, total_timesteps=100_000, eval_episodes=0))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= 475, last_20


# Measured here (seed 1): with γ = 0.9 (the Zoo's TRPO setting for Pendulum) a last-20 mean of
# about −175 by 164k steps; with the default γ = 0.99 still about −875 at 176k.
def test_learns_pendulum(log_dir):
    result = tooling.main(trpo, tooling.run_args(trpo)(env_id="Pendulum-v1", gamma=0.9, log_dir=log_dir, total_timesteps=200_000,
                                  eval_episodes=0))
    last_20 = [r for _, r in result["episodic_returns"][-20:]]
    assert np.mean(last_20) >= -300, last_20


class ArmsEnv(gym.Env):
    """One constant observation and `n` actions: action 1 earns +1, every other −1; 10 steps an
    episode. Its Fisher matrix is so simple that conjugate gradient converges at its first
    iteration. With n = 1 there is no choice to make: every gradient of log π is 0."""

    def __init__(self, n: int = 2):
        self.observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(n)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(1, np.float32), {}

    def step(self, action):
        return np.ones(1, np.float32), 1.0 if action == 1 else -1.0, False, False, {}


gym.register("TwoArms-v0", entry_point=ArmsEnv, max_episode_steps=10)
gym.register("OneArm-v0", entry_point=ArmsEnv, max_episode_steps=10, kwargs={"n": 1})


def test_conjugate_gradient_stops_at_a_zero_residual(module=trpo):
    """A = 2I is solved exactly by the first step; the residual is then 0, and a second step
    would divide 0 by 0. A zero right-hand side gives x = 0 without any step."""
    b = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    products = []
    x = module.conjugate_gradient(lambda v: products.append(v) or 2 * v, b, iters=10)
    torch.testing.assert_close(x, b / 2)
    assert len(products) == 1
    assert torch.equal(module.conjugate_gradient(lambda v: 2 * v, torch.zeros(5), iters=10), torch.zeros(5))


def spy_on_steps(monkeypatch) -> list:
    """Make trpo_step's line search record the full step it is given."""
    steps, real = [], trpo.line_search
    monkeypatch.setattr(trpo, "line_search", lambda params, step, *a: steps.append(step.clone()) or real(params, step, *a))
    return steps


def test_a_zero_gradient_gives_a_zero_step_and_an_update_marked_rejected(monkeypatch):
    agent, obs, actions, _ = batch()
    before = torch.nn.utils.parameters_to_vector(agent.parameters()).clone()
    steps = spy_on_steps(monkeypatch)
    stats = trpo.trpo_step(agent, policy_params(agent), obs, actions, torch.zeros(512), ARGS)
    assert torch.equal(steps[0], torch.zeros_like(steps[0]))  # zero, not NaN
    assert torch.equal(torch.nn.utils.parameters_to_vector(agent.parameters()), before)
    assert stats["kl"] == 0 and stats["step_accepted"] == 0 and stats["backtracks"] == 10


def test_learns_an_env_where_conjugate_gradient_converges_at_once(monkeypatch, log_dir):
    """On TwoArms every conjugate gradient stops after its first iteration (or before it, once
    the gradient is all but 0), and the policy still learns: the right action every time, +10
    an episode."""
    iterations, real = [], trpo.conjugate_gradient

    def counting(product, b, iters):
        calls = []
        x = real(lambda v: calls.append(1) or product(v), b, iters)
        iterations.append(len(calls))
        return x

    monkeypatch.setattr(trpo, "conjugate_gradient", counting)
    result = tooling.main(trpo, short_args(trpo, log_dir, env_id="TwoArms-v0", num_envs=2, num_steps=100, total_timesteps=6000))
    assert iterations[0] == 1 and max(iterations) == 1
    assert np.mean([r for _, r in result["episodic_returns"][-10:]]) >= 9.5


def test_a_run_whose_every_step_is_rejected_says_so(monkeypatch, log_dir, capsys):
    """OneArm: log π is always 0, so the gradient is 0, every update takes a zero step (never NaN)
    and the run ends with one line that says the policy never moved."""
    steps = spy_on_steps(monkeypatch)
    result = tooling.main(trpo, short_args(trpo, log_dir, env_id="OneArm-v0", num_envs=2, num_steps=100, total_timesteps=600))
    assert len(result["episodic_returns"]) == 60 and len(steps) == 3
    assert all(torch.equal(step, torch.zeros_like(step)) for step in steps)
    assert "the line search rejected the step of every update" in capsys.readouterr().err


def test_critic_regresses_on_lambda_one_returns_and_the_step_gets_normalised_lambda_advantages(monkeypatch, log_dir):
    """Inside a real run, as in vpg.py: the critic's targets are GAE's returns with λ = 1, and the
    trust-region step gets the advantages with the run's λ, normalised over the batch."""
    gae_inputs, targets, step_advantages = [], [], []
    real_gae, real_value_loss, real_step = trpo.compute_gae, trpo.value_loss, trpo.trpo_step

    def spy_gae(*args):
        gae_inputs.append([a.clone() if torch.is_tensor(a) else a for a in args])
        return real_gae(*args)

    monkeypatch.setattr(trpo, "compute_gae", spy_gae)
    monkeypatch.setattr(trpo, "value_loss", lambda v, r: (targets.append(r.clone()), real_value_loss(v, r))[1])
    monkeypatch.setattr(trpo, "trpo_step", lambda ag, p, o, ac, adv, args: (step_advantages.append(adv.clone()),
                                                                           real_step(ag, p, o, ac, adv, args))[1])
    # Tick: every episode is cut by the time limit at step 5, so the targets must stop there too
    tooling.main(trpo, short_args(trpo, log_dir, env_id="TickDiscrete-v0", num_envs=2, total_timesteps=24, num_steps=12,
                          vf_iters=2))
    rewards, values, next_values, terminations, truncations, gamma, gae_lambda = gae_inputs[0][:7]
    assert gae_lambda == 0.97 and truncations.sum() == 4
    _, expected_targets = real_gae(rewards, values, next_values, terminations, truncations, gamma, 1.0)
    torch.testing.assert_close(targets[0], expected_targets.reshape(-1))
    advantages, _ = real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)
    a = advantages.reshape(-1)
    torch.testing.assert_close(step_advantages[0], (a - a.mean()) / (a.std() + 1e-8))
