"""Each script's loss, on sampled episodes, yields the true policy gradient.

On a small MDP whose objective J(θ) = E[Σ_t r_t] is computable exactly (a linear solve over its
states), the gradient of each script's own loss, built with its own functions (rewards-to-go,
GAE, loss) and its own actor network, is averaged over sampled episodes and compared with the
exact ∇_θ J from autograd through that solve. For the Gaussian heads, a one-step bandit with a
quadratic reward has J in closed form. The check is statistical: the estimate is split into
batches, and every component of the mean must lie within 4 standard errors of the exact
gradient, and point the same way (cosine similarity > 0.99). Deliberately wrong estimators
(returns leaking into the next episode, a TD error that bootstraps through a termination,
Gaussian log-probs averaged over action dimensions) must fail the same check.

γ = 1 throughout, on purpose: the scripts' estimators drop the γ^t factor of the discounted
objective's gradient, so with γ < 1 they are not the gradient of any objective (Thomas 2014;
Nota & Thomas 2020). With γ = 1 and episodes that end with certainty, they are exactly ∇J.
"""

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_continuous
import ppo_discrete
import reinforce
import trpo
import vpg

N_STATES, N_ACTIONS = 4, 2
BATCHES, EPISODES_PER_BATCH = 50, 400


class SmallMDP(gym.Env):
    """Four states, observed one-hot; two actions. Each (s, a) moves to a random next state or
    ends the episode (probability ≥ 0.25, so every episode ends and γ = 1 is well defined), and
    pays a reward with mean R[s, a] plus uniform noise in ±0.5."""

    def __init__(self):
        rng = np.random.default_rng(7)
        self.R = rng.uniform(-1, 1, (N_STATES, N_ACTIONS))
        self.P = rng.dirichlet(np.ones(N_STATES + 1), (N_STATES, N_ACTIONS))  # last column: end
        self.P[..., -1] = np.maximum(self.P[..., -1], 0.25)
        self.P /= self.P.sum(-1, keepdims=True)
        self.mu0 = np.array([0.4, 0.3, 0.2, 0.1])  # start distribution
        self.observation_space = gym.spaces.Box(0, 1, (N_STATES,), np.float32)
        self.action_space = gym.spaces.Discrete(N_ACTIONS)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = self.np_random.choice(N_STATES, p=self.mu0)
        return np.eye(N_STATES, dtype=np.float32)[self.s], {}

    def step(self, action):
        reward = self.R[self.s, action] + self.np_random.uniform(-0.5, 0.5)
        nxt = self.np_random.choice(N_STATES + 1, p=self.P[self.s, action])
        terminated = bool(nxt == N_STATES)
        self.s = 0 if terminated else nxt
        return np.eye(N_STATES, dtype=np.float32)[self.s], reward, terminated, False, {}


def exact_objective(env: SmallMDP, probs: torch.Tensor):
    """J = μ0ᵀ V^π with V^π = (I − P^π)^{-1} r^π (γ = 1), differentiable in the policy probs (S, A)."""
    P, R = torch.tensor(env.P[..., :-1], dtype=torch.float64), torch.tensor(env.R, dtype=torch.float64)
    P_pi = torch.einsum("sa,sat->st", probs, P)  # state-to-state transition matrix of the policy
    r_pi = (probs * R).sum(-1)
    V = torch.linalg.solve(torch.eye(N_STATES, dtype=torch.float64) - P_pi, r_pi)
    return torch.tensor(env.mu0) @ V, V


def discrete_policy(module, agent):
    """π(·|s) for all four states (S, A), through the script's own distribution code."""
    obs = torch.eye(N_STATES).repeat_interleave(N_ACTIONS, 0)  # each state once per action
    actions = torch.arange(N_ACTIONS).repeat(N_STATES)
    logprob = module_logprob(module, agent, obs, actions)
    return logprob.exp().reshape(N_STATES, N_ACTIONS).double()


def module_logprob(module, agent, obs, actions):
    out = agent.get_action(obs, actions) if hasattr(agent, "get_action") else agent.get_action_and_value(obs, actions)
    return out[1]


def make_agent(module, obs_dim, act_dim, continuous):
    """The script's Agent (any copy of a script, so exercises/grade.py can pass a student's)."""
    torch.manual_seed(3)
    if "action_space" in inspect.signature(module.Agent).parameters:  # reinforce.py and vpg.py
        space = gym.spaces.Box(-1, 1, (act_dim,)) if continuous else gym.spaces.Discrete(act_dim)
        return module.Agent(obs_dim, space)
    return module.Agent(obs_dim, act_dim)


def policy_params(agent):
    return [p for name, p in agent.named_parameters() if not name.startswith("critic")]


def sample_episodes(env: SmallMDP, probs: np.ndarray, n: int, rng: np.random.Generator):
    """n episodes of the policy with these probabilities, laid end to end: obs (B, S), actions,
    rewards, terminations (B,), terminations = 1 at each episode's last step."""
    obs, actions, rewards, terms = [], [], [], []
    for _ in range(n):
        o, _ = env.reset(seed=int(rng.integers(2**31)))
        done = False
        while not done:
            a = rng.choice(N_ACTIONS, p=probs[int(o.argmax())])
            o2, r, done, _, _ = env.step(a)
            obs.append(o), actions.append(a), rewards.append(r), terms.append(float(done))
            o = o2
    return (torch.tensor(np.array(obs)), torch.tensor(actions), torch.tensor(rewards, dtype=torch.float32),
            torch.tensor(terms))


def matches(estimates: list[torch.Tensor], exact: torch.Tensor) -> tuple[bool, str]:
    """Do per-batch gradient estimates (K, D) agree with the exact gradient (D,)?"""
    g = torch.stack(estimates).double()
    mean, se = g.mean(0), g.std(0) / np.sqrt(len(g))
    z = ((mean - exact).abs() / (se + 1e-12)).max().item()
    cosine = torch.nn.functional.cosine_similarity(mean, exact, dim=0).item()
    return z <= 4 and cosine > 0.99, f"max |error| = {z:.2f} standard errors, cosine {cosine:.4f}"


def flat_grad(loss, params):
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])


# --- the estimators: each script's loss on a batch of episodes, rescaled to a per-episode mean ---
# The scripts average their losses over the B steps of a batch; the policy gradient is a mean over
# n episodes of Σ_t ∇log π(a_t|s_t)·weight_t. So ĝ = −∇L · B / n.


def tabular_estimate(module, agent, batch, V, gae_lambda=None, leak=False, through_termination=False):
    obs, actions, rewards, terms = batch
    logprob = module_logprob(module, agent, obs, actions)
    if hasattr(module, "reinforce_loss"):
        returns = module.compute_returns(rewards, torch.zeros_like(terms) if leak else terms, 1.0)
        loss = module.reinforce_loss(logprob, returns)
    else:
        # One column (T = B, N = 1) of episodes end to end; the exact V^π as the critic. Where an
        # episode ends, V(s_{t+1}) is masked by the termination (the next row starts a new episode).
        values = V[obs.argmax(1)].float()
        next_values = torch.cat([values[1:], torch.zeros(1)])
        mask = torch.zeros_like(terms) if through_termination else terms
        advantages, _ = module.compute_gae(rewards[:, None], values[:, None], next_values[:, None], mask[:, None],
                                           torch.zeros_like(terms)[:, None], 1.0, gae_lambda)
        advantages = advantages[:, 0]
        if hasattr(module, "vpg_loss"):
            loss = module.vpg_loss(logprob, advantages)
        elif hasattr(module, "trpo_step"):  # TRPO's g, the gradient of L(θ) at θ = θ_old
            loss = -module.surrogate(logprob, logprob.detach(), advantages)
        else:  # the clipped surrogate at its first minibatch step, where π_θ = π_θ_old: ratio 1
            zeros = torch.zeros_like(logprob)
            loss, _ = module.ppo_loss(logprob, logprob.detach(), advantages, zeros, zeros, zeros, zeros,
                                            clip_coef=0.2, clip_vloss=True, ent_coef=0.0, vf_coef=0.0)
    n_episodes = terms.sum()
    return -flat_grad(loss, policy_params(agent)) * len(rewards) / n_episodes


def tabular_check(module, **kwargs):
    env = SmallMDP()
    agent = make_agent(module, N_STATES, N_ACTIONS, continuous=False)
    probs = discrete_policy(module, agent)
    J, V = exact_objective(env, probs)
    exact = flat_grad(J, policy_params(agent)).double()
    rng = np.random.default_rng(0)
    p = probs.detach().numpy()
    p = p / p.sum(1, keepdims=True)  # exact float64 sums for NumPy's sampler
    estimates = [tabular_estimate(module, agent, sample_episodes(env, p, EPISODES_PER_BATCH, rng), V.detach(), **kwargs)
                 for _ in range(BATCHES)]
    return matches(estimates, exact)


# Advantage normalisation, which the scripts apply in training, is left out here: it rescales
# each batch by a random factor, so only the direction would survive, and it is tested elsewhere.
CASES = [(reinforce, {}), (vpg, {"gae_lambda": 1.0}), (vpg, {"gae_lambda": 0.8}), (trpo, {"gae_lambda": 0.97}),
         (ppo_discrete, {"gae_lambda": 0.95})]


@pytest.mark.parametrize("module,kwargs", CASES, ids=["reinforce", "vpg-lambda1", "vpg-lambda0.8", "trpo", "ppo_discrete"])
def test_loss_gradient_is_the_policy_gradient(module, kwargs):
    ok, detail = tabular_check(module, **kwargs)
    assert ok, detail


@pytest.mark.parametrize("module,kwargs", [(reinforce, {"leak": True}), (vpg, {"gae_lambda": 1.0, "through_termination": True})],
                         ids=["returns-leak-across-episodes", "td-error-bootstraps-through-termination"])
def test_wrong_estimator_is_rejected(module, kwargs):
    ok, detail = tabular_check(module, **kwargs)
    assert not ok, detail


# --- the Gaussian head: a one-step bandit, r(a) = −‖a − c‖² + noise, with J in closed form ---
# With a ~ N(μ, diag σ²): E[r] = −‖μ − c‖² − Σ_j σ_j².

OBS = torch.tensor([[0.5, -1.0, 2.0]])
TARGET = torch.tensor([0.7, -0.3])


def gaussian_check(module, average_over_dims=False):
    agent = make_agent(module, 3, 2, continuous=True)
    params = policy_params(agent)
    mean, logstd = agent.actor(OBS)[0], agent.actor_logstd.flatten()
    exact = flat_grad(-((mean - TARGET) ** 2).sum() - (2 * logstd).exp().sum(), params).double()
    generator = torch.Generator().manual_seed(0)
    estimates = []
    for _ in range(BATCHES):
        n = 2000
        obs = OBS.expand(n, 3)
        with torch.no_grad():
            actions = mean + logstd.exp() * torch.randn(n, 2, generator=generator)
        rewards = -((actions - TARGET) ** 2).sum(-1) + torch.rand(n, generator=generator) - 0.5
        if average_over_dims:  # the bug: log π as the mean of the per-dimension log-densities
            dist = torch.distributions.Normal(agent.actor(obs), agent.actor_logstd.exp().expand(n, 2))
            logprob = dist.log_prob(actions).mean(-1)
        else:
            logprob = module_logprob(module, agent, obs, actions)
        # Every episode is one step, so G = r, and the critic's baseline is the exact E[r].
        baseline = (-((mean - TARGET) ** 2).sum() - (2 * logstd).exp().sum()).detach()
        if hasattr(module, "reinforce_loss"):
            loss = module.reinforce_loss(logprob, rewards)
        elif hasattr(module, "vpg_loss"):
            loss = module.vpg_loss(logprob, rewards - baseline)
        elif hasattr(module, "trpo_step"):
            loss = -module.surrogate(logprob, logprob.detach(), rewards - baseline)
        else:
            zeros = torch.zeros(n)
            loss, _ = module.ppo_loss(logprob, logprob.detach(), rewards - baseline, zeros, zeros, zeros, zeros,
                                              clip_coef=0.2, clip_vloss=True, ent_coef=0.0, vf_coef=0.0)
        estimates.append(-flat_grad(loss, params))
    return matches(estimates, exact)


@pytest.mark.parametrize("module", [reinforce, vpg, trpo, ppo_continuous])
def test_gaussian_loss_gradient_is_the_policy_gradient(module):
    ok, detail = gaussian_check(module)
    assert ok, detail


def test_gaussian_log_probs_averaged_over_dimensions_are_rejected():
    ok, detail = gaussian_check(vpg, average_over_dims=True)
    assert not ok, detail
