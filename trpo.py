"""Trust region policy optimisation (TRPO) with a learned value baseline and GAE-λ, in one file.

Schulman, Levine, Moritz, Jordan and Abbeel (2015), "Trust region policy optimization"
(arXiv:1502.05477), in its practical form: a natural-gradient step found by conjugate gradient
on Fisher-vector products, scaled to the edge of a KL trust region and checked by a line
search; with generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438). For
Gymnasium environments with `Discrete` actions (CartPole-v1, LunarLander-v3) or `Box` actions
(Pendulum-v1, HalfCheetah-v4).

    python trpo.py                                          # CartPole-v1, 500k steps
    python trpo.py --env-id HalfCheetah-v4 --total-timesteps 1000000
    python trpo.py --help                                   # every flag, with its meaning
    python trpo.py --save-model                             # writes runs/<run>/model.pt
    python trpo.py --eval-checkpoint runs/<run>/model.pt --capture-video
    tensorboard --logdir runs

What changes from vpg.py, one idea: a bounded step, and only the policy's update. vpg.py takes
one Adam step along the gradient g, and nothing says how far that step moves the policy. TRPO
bounds the move: it maximises the surrogate L(θ) = E[π_θ/π_θ_old · Â] subject to a mean
KL[π_θ_old ‖ π_θ] ≤ δ. With L linearised and the KL taken to second order around θ_old, the
solution is a step along the natural gradient H⁻¹g, with H the Hessian of the mean KL (the
Fisher information): conjugate gradient finds x ≈ H⁻¹g from products H·v alone
(`fisher_vector_product`, `conjugate_gradient`; both use H + cI, damped by c = --cg-damping),
the step is scaled to the edge of the trust region, √(2δ / xᵀ(H + cI)x)·x, and a line search
shrinks it until the measured KL is within δ and the surrogate improves (`line_search`);
`trpo_step` puts them together. The policy has no optimiser and no step size α
(`--learning-rate` is gone; δ takes its place); the critic, the rollout, GAE and the budget are
vpg.py's, with its defaults.

Defaults follow Spinning Up's TRPO (its TensorFlow 1 code), which keeps its VPG's batch and
critic (4000 steps per batch, V lr 1e-3, 80 critic steps, γ 0.99, λ 0.97): δ = 0.01 and damping
0.1 (flags), and in `trpo_step` 10 conjugate-gradient iterations (as in Schulman et al. 2015)
and at most 10 tries of the line search, shrinking by 0.8 (as in SB3-contrib's TRPO too).

Lines starting with `# math:` hold the LaTeX of the equation the code below computes. The
training algorithm ends with `train`; the tooling after it (input checks, evaluation,
checkpoints) can be skipped on a first reading.
"""

import copy
import functools
import importlib.util
import math
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "CartPole-v1"
    """Gymnasium env with Discrete or Box actions; module:EnvId for an env of your own"""
    hidden_size: int = 64
    """units in each of the two tanh hidden layers of the actor and of the critic"""
    total_timesteps: int = 500_000
    """environment steps to train for, summed over all envs"""
    max_kl: float = 0.01
    """δ, the trust region: the largest mean KL[π_old ‖ π_θ] one update may reach"""
    cg_damping: float = 0.1
    """c > 0, added to the Fisher matrix as H + cI so that conjugate gradient stays stable"""
    vf_learning_rate: float = 1e-3
    """Adam step size of the critic (Spinning Up's vf_lr)"""
    vf_iters: int = 80
    """full-batch gradient steps on the critic per batch (Spinning Up's train_v_iters)"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 1000
    """T, steps per environment in each batch; batch size = N·T (Spinning Up: 4000 per epoch)"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.97
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""

    # --- the run: seed, threads, logging, saving, evaluation ---
    seed: int = 1
    """seed of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found); small networks often run as fast on a CPU"""
    exp_name: str = "trpo"
    """name of the experiment; part of the run directory runs/<env>__<exp>__<seed>__<time>"""
    log_dir: str = "runs"
    """folder that holds one sub-folder per run (TensorBoard events, checkpoint, videos)"""
    save_model: bool = False
    """save the policy to <run>/model.pt at the end of training, or when stopped early"""
    checkpoint_every: int = 20
    """write <run>/checkpoint.pt every N updates and when the run stops (0: never)"""
    resume: str | None = None
    """go on with the run of this checkpoint.pt, in its folder, with the flags saved in it"""
    eval_episodes: int = 10
    """deterministic episodes after training (0: none), each cut at 10,000 steps at most"""
    eval_seed: int | None = None
    """seed of the evaluation episodes; by default --seed + 10,000 (seeds training never used)"""
    eval_checkpoint: str | None = None
    """evaluate this model.pt instead of training; other flags default to those it was saved with"""
    capture_video: bool = False
    """film the evaluation episodes into <run>/videos (needs: pip install moviepy)"""
    track: bool = False
    """mirror the TensorBoard logs to Weights & Biases (needs: pip install wandb)"""
    wandb_project_name: str = "pgref"
    """the W&B project of --track"""
    wandb_entity: str | None = None
    """the W&B team or user of --track (by default, your own)"""


def make_env(env_id: str, **kwargs) -> gym.Env:
    """The one place where an environment is made: training, evaluation and the input checks
    all call it, so keyword arguments for your env, or a wrapper, added here apply everywhere
    (docs/own-env.md). Evaluation passes render_mode for videos."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # Gymnasium 1.x resets a finished sub-environment automatically. We choose the SAME_STEP mode:
    # the step that ends an episode already returns the first observation of the next one, and
    # the real last observation is in infos["final_obs"]. So every stored transition is real (the
    # default NEXT_STEP mode would spend one action per episode on a reset), and the final
    # observation is at hand to bootstrap a truncated episode.
    envs = gym.vector.SyncVectorEnv([functools.partial(make_env, env_id)] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    # Adds infos["episode"] (return and length) at each episode's end, for the logs.
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    # Orthogonal weights scaled by `std`, zero biases: the initialisation of PPO's reference code
    # (openai/baselines; core detail 2 of Huang et al. 2022). √2 for the hidden layers is its
    # convention (it is the gain for ReLU; tanh's would be 5/3); 0.01 for the policy head, so that
    # its first outputs are near 0 (a near-uniform softmax, a mean action near 0); 1 for V.
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def mlp(in_dim: int, hidden_size: int, out_dim: int, out_std: float) -> nn.Sequential:
    return nn.Sequential(
        layer_init(nn.Linear(in_dim, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, out_dim), std=out_std),
    )


class Agent(nn.Module):
    """Actor π_θ(a|s) and critic V_φ(s), each a tanh MLP with two hidden layers of --hidden-size
    units (64 by default). The actor's output is the logits of a Categorical (Discrete actions)
    or the mean of a diagonal Gaussian (Box actions), whose log-std is a learned vector that
    does not depend on the state."""

    def __init__(self, obs_dim: int, action_space: gym.Space, hidden_size: int = 64):
        super().__init__()
        # The one place where the action space decides the policy head: a Gaussian for Box
        # actions, a Categorical for Discrete ones.
        self.continuous = isinstance(action_space, gym.spaces.Box)
        act_dim = action_space.shape[0] if self.continuous else int(action_space.n)
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        if self.continuous:
            # log σ = −0.5 (σ ≈ 0.61) at the start, as in Spinning Up's VPG. With σ ≈ 0.61 about a
            # tenth of the first actions fall outside [−1, 1], the bounds of most MuJoCo envs
            # (Humanoid's are ±0.4), and reach the env clipped (with σ = 1, a third).
            self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B, 1) -> (B,): one value per observation

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,) or (B, act_dim), log π(a|s), entropy, V(s), each (B,).
        Samples an action unless one is given (the update re-evaluates stored actions)."""
        # Both distributions written out, so that their formulas are on the page (tests compare
        # them with torch.distributions, which is why log σ is computed as log(σ), as it does).
        if self.continuous:
            mean = self.actor(obs)  # μ_θ(s), (B, act_dim)
            std = self.actor_logstd.exp().expand_as(mean)  # σ, (B, act_dim): state-independent
            if action is None:
                action = torch.normal(mean, std)
            # The action dimensions are independent, so the density is a product: log-probs add up
            # over the last axis, and so do the entropies.
            # math: \log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)
            # math: \log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
            log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                           - math.log(math.sqrt(2 * math.pi)))  # (B, act_dim)
            logprob = log_density.sum(-1)
            # math: H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
            return action, logprob, entropy, self.get_value(obs)
        # The actor's outputs z are logits: π_θ(a|s) is the softmax of z.
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor(obs)
        log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
        if action is None:
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)  # log π(a|s) of the taken action
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy, self.get_value(obs)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.

    All inputs have shape (T, N), time-major. next_values[t] = V(s_{t+1}), the value of the
    observation that really followed step t: on a time-limit truncation that is the final
    observation of the episode, not the reset observation the vector env returned.

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0

    A terminated step has no future, so it does not bootstrap. A truncated step was cut by a time
    limit the agent cannot see, so its future is estimated by V(final observation) (Pardo et al.
    2018). Either way the recursion stops: A_{t+1} belongs to the next episode. A rollout that
    ends mid-episode bootstraps from V(s_T) through δ_{T-1}. Returns (advantages, returns), both
    (T, N), with returns = A + V; with λ = 1, the discounted rewards-to-go, bootstrapped at a cut.
    """
    # Every δ_t at once; only the recursion over A needs a loop (run backwards in time).
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])  # A_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def surrogate(logprob, old_logprob, advantages):
    """The surrogate objective L(θ) on a batch of B steps, to maximise. Inputs have shape (B,).

    The samples were drawn by π_θ_old, so each advantage is weighted by the probability ratio
    r_t(θ) = π_θ(a_t|s_t) / π_θ_old(a_t|s_t), an importance weight (Schulman et al. 2015, eq.
    14). At θ = θ_old, ∇_θ r_t = ∇_θ log π_θ(a_t|s_t): the gradient g of L is vpg.py's policy
    gradient. Away from θ_old, L estimates the improvement only while the policy stays close
    (the states still come from π_θ_old), hence the trust region.
    """
    # math: L(\theta) = \frac{1}{B}\sum_t r_t(\theta)\, \hat A_t
    # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
    return ((logprob - old_logprob).exp() * advantages).mean()


def mean_kl(agent, obs, old):
    """The mean over a batch of states (B, obs_dim) of KL[π_old(·|s) ‖ π_θ(·|s)], in closed form;
    a scalar, 0 at θ = θ_old. `old` is a copy of the agent at θ_old; its weights never change,
    and gradients are taken with respect to the agent's alone."""
    # The actor's outputs: the means μ(s) of the Gaussians or the logits z of the Categoricals
    out, old_out = agent.actor(obs), old.actor(obs)
    if agent.continuous:
        logstd, old_logstd = agent.actor_logstd, old.actor_logstd
        # Per action dimension j (the dimensions are independent, so the KLs add up):
        # math: \mathrm{KL}_j = \log\sigma_j - \log\sigma_{old,j}
        # math: \qquad + (\sigma_{old,j}^2 + (\mu_{old,j} - \mu_j)^2) / (2\sigma_j^2) - \tfrac12
        kl = (logstd - old_logstd - 0.5
              + ((2 * old_logstd).exp() + (old_out - out) ** 2) / (2 * (2 * logstd).exp()))
    else:
        log_pi, old_log_pi = out.log_softmax(-1), old_out.log_softmax(-1)
        # math: \mathrm{KL} = \sum_a \pi_{old}(a|s)\, (\log\pi_{old}(a|s) - \log\pi_\theta(a|s))
        kl = old_log_pi.exp() * (old_log_pi - log_pi)
    return kl.sum(-1).mean()


def flat_grad(output, params, **kwargs):
    """∇_θ output as one flat vector (n,), θ = `params`; kwargs go to torch.autograd.grad."""
    return nn.utils.parameters_to_vector(torch.autograd.grad(output, params, **kwargs))


def fisher_vector_product(kl, params, damping):
    """The function v ↦ (H + cI)·v, with H the (n, n) Hessian of the scalar `kl` with respect to
    θ = `params` (n weights in all), never formed.

    ∇_θ KL is taken with create_graph=True so that it can be differentiated again: the gradient
    of the scalar ∇KL·v is H·v (double backprop, Schulman et al. 2015, appendix C). For the mean
    KL at θ_old this Hessian is the Fisher information matrix of π_θ, averaged over the states.
    The damping c keeps H + cI well conditioned for conjugate gradient: H, estimated from one
    batch, can be near singular.
    """
    kl_grad = flat_grad(kl, params, create_graph=True)  # (n,), 0 at θ_old
    # math: H v = \nabla_\theta \big( (\nabla_\theta \overline{\mathrm{KL}})^\top v \big)
    return lambda v: flat_grad(kl_grad @ v, params, retain_graph=True) + damping * v


def conjugate_gradient(matrix_vector_product, b, iters):
    """Solve A x = b for a symmetric positive-definite A known only through A·v: at most `iters`
    conjugate-gradient steps from x = 0. Step k gives the x that minimises the error in the
    A-norm, (x − A⁻¹b)ᵀA(x − A⁻¹b), over the Krylov subspace span{b, Ab, ..., A^{k−1}b}, one
    dimension larger per step: exact in n steps for an (n, n) A (up to rounding), and TRPO stops
    after a few. It also stops once the residual is (near) zero, as OpenAI Baselines' and
    SB3-contrib's TRPO do: x is then exact, and another step would divide 0 by 0."""
    x, r, p = torch.zeros_like(b), b, b  # residual r = b − A x; search direction p
    r_dot_r = r @ r
    for _ in range(iters):
        if r_dot_r < 1e-10:  # their tolerance on rᵀr; b = 0 stops here at once, with x = 0
            break
        Ap = matrix_vector_product(p)
        # math: \alpha = r^\top r / p^\top A p
        # math: x \leftarrow x + \alpha p, \quad r \leftarrow r - \alpha A p
        alpha = r_dot_r / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        new_r_dot_r = r @ r
        # math: p \leftarrow r + \frac{r_{new}^\top r_{new}}{r^\top r}\, p
        p, r_dot_r = r + (new_r_dot_r / r_dot_r) * p, new_r_dot_r
    return x


@torch.no_grad()  # no gradient: the line search only sets θ and measures L and the KL
def line_search(params, full_step, acceptable, backtrack_coef, backtrack_iters):
    """Try θ = θ_old + β^k · full_step for k = 0, 1, ..., backtrack_iters − 1 (β =
    backtrack_coef) and keep the first θ that `acceptable()` accepts; if none, θ stays θ_old.
    Returns k, or backtrack_iters if no step was taken. The step was sized on models of the KL
    and of L (quadratic and linear), which far from θ_old can be wrong: the line search
    measures both instead."""
    old_params = nn.utils.parameters_to_vector(params)
    for k in range(backtrack_iters):
        nn.utils.vector_to_parameters(old_params + backtrack_coef**k * full_step, params)
        if acceptable():
            return k
    nn.utils.vector_to_parameters(old_params, params)
    return backtrack_iters


def trpo_step(agent, params, obs, actions, advantages, args):
    """One trust-region update of the policy's weights θ = `params` on a batch of B steps (obs
    (B, obs_dim), actions (B, ...), advantages (B,)), in place; returns its diagnostics.

    Maximise L(θ) subject to mean KL[π_θ_old ‖ π_θ] ≤ δ (Schulman et al. 2015, eq. 14), with L
    to first order and the KL to second order around θ_old: the solution is the natural
    gradient H⁻¹g scaled to the edge of the region, which the line search then checks.
    """
    _, logprob, entropy, _ = agent.get_action_and_value(obs, actions)
    old_logprob = logprob.detach()
    old = copy.deepcopy(agent)  # π_θ_old, fixed for this update
    objective = surrogate(logprob, old_logprob, advantages)  # L(θ_old)
    g = flat_grad(objective, params)  # (n,): vpg.py's policy gradient
    fvp = fisher_vector_product(mean_kl(agent, obs, old), params, args.cg_damping)  # v ↦ (H+cI)v
    # x ≈ H⁻¹g, the natural gradient: 10 iterations, as in Schulman et al. (2015)
    x = conjugate_gradient(fvp, g, 10)
    # The longest step along x that the quadratic model of the KL keeps inside the region, with
    # the damped (H + cI) of `fvp` standing in for H; x = 0 (a zero gradient) gives a zero step:
    # math: \tfrac12 \beta^2 x^\top(H+cI)x = \delta \iff \beta = \sqrt{2\delta / x^\top(H+cI)x}
    full_step = (2 * args.max_kl / (x @ fvp(x)).clamp_min(1e-30)) ** 0.5 * x

    def acceptable():  # at the current θ: inside the trust region, and L rose
        new_logprob = agent.get_action_and_value(obs, actions)[1]
        return (mean_kl(agent, obs, old) <= args.max_kl
                and surrogate(new_logprob, old_logprob, advantages) > objective)

    # At most 10 tries, the full step shrunk by 0.8^k for k = 0..9, as in SB3-contrib's TRPO
    # and Spinning Up's.
    backtracks = line_search(params, full_step, acceptable, 0.8, 10)
    # The mean KL that the update reached, measured exactly; the other scripts estimate it from
    # the samples (approx_kl, which the guard rail reads): here that key gets the exact value.
    kl = mean_kl(agent, obs, old).item()
    return {"kl": kl, "approx_kl": kl, "backtracks": backtracks, "entropy": entropy.mean().item(),
            "step_accepted": float(backtracks < 10)}  # 0: every try rejected, θ stayed θ_old


def value_loss(value, returns):
    """Mean squared error of the critic against its targets; inputs have shape (B,)."""
    # math: L^{V}(\phi) = \frac{1}{B}\sum_t \big(V_\phi(s_t) - \hat R_t\big)^2
    return ((value - returns) ** 2).mean()


def train(args: Args) -> dict:
    """Train with TRPO; return a summary dict (run_dir, episodic returns, eval returns, ...)."""
    check_args(args)
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)  # the thread count changes float summation order
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, action_space = envs.single_observation_space.shape[0], envs.single_action_space
    agent = Agent(obs_dim, action_space, args.hidden_size).to(device)
    # The policy's weights θ (the actor and log σ) take the trust-region step; only the critic
    # has an optimiser. Adam's ε = 1e-5 instead of 1e-8, as in PPO's reference code (core detail 3
    # of Huang et al. 2022); `fused`: one kernel for all weights.
    policy_params = [p for name, p in agent.named_parameters() if not name.startswith("critic")]
    vf_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_learning_rate, eps=1e-5,
                                    fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    # NumPy arrays while the rollout runs (a step's few numbers cost less to store there than in
    # tensors); the whole rollout becomes tensors once, before GAE.
    shape = (args.num_steps, args.num_envs)  # (T, N)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)
    actions_np = np.zeros((*shape, *action_space.shape),
                          dtype=np.float32 if agent.continuous else np.int64)
    # final_values: V(final obs) at the steps where an episode was truncated
    values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(5))

    episodic_returns = []  # (step, return) of every training episode
    next_obs_np, _ = envs.reset(seed=args.seed)  # env i is seeded with seed + i
    next_obs_np = next_obs_np.astype(np.float32)  # float32, as the networks are
    # The tooling after `train`: the run's folder, logs and checkpoints, guard rails, Ctrl-C.
    # With --resume, the checkpoint's state is put into these objects, in place, and the run
    # goes on from its step, as if it had never stopped.
    run = Run(args, agent, envs, vf_optimizer, policy_params, episodic_returns, next_obs_np)
    writer, global_step, start_time, last_print = run.writer, run.last_step, run.start_time, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        # Collecting needs no gradient (the update recomputes log π and V): inference mode is
        # torch's no-gradient mode with the least bookkeeping.
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)  # (N, obs_dim)
                action, _, _, value = agent.get_action_and_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], values_np[step] = action_np, value.cpu().numpy()
                # A Gaussian sample can leave the action bounds: the env gets it clipped, the batch
                # keeps the sample itself, whose log-probability is the one the gradient needs.
                env_action = action_np
                if agent.continuous:
                    env_action = np.clip(action_np, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                run.check_env(next_obs_np, reward, infos, global_step)  # stops on NaN or inf
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs_np = next_obs_np.astype(np.float32)
                if truncated.any():  # bootstrap a cut episode with V of its real final observation
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()
                for i in np.flatnonzero(infos.get("_episode", [])):  # the episodes that ended
                    episode_return, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, float(episode_return)))

        # --- bootstrap and advantages ---
        obs, actions, values, final_values, rewards, terminations, truncations = (
            torch.tensor(x, device=device)  # (T, N, ...): copies, the arrays are refilled next
            for x in (obs_np, actions_np, values_np, final_values_np, rewards_np, terminations_np,
                      truncations_np))  # rollout
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            next_value = agent.get_value(next_obs)  # V(s_T), (N,): for paths cut by the batch end
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
        # truncated. After a termination it is the reset observation's value, masked in GAE.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        advantages, _ = compute_gae(rewards, values, next_values, terminations, truncations,
                                    args.gamma, args.gae_lambda)
        # The critic regresses on the discounted rewards-to-go, bootstrapped the same way (as in
        # Spinning Up): GAE's returns with λ = 1. With k the number of steps from t to the end of
        # the episode or of the batch, whichever comes first, V(s_{t+k}) is V(final observation)
        # after a truncation, V(s_T) at the batch's end, and 0 after a termination:
        # math: \hat R_t = \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})
        _, returns = compute_gae(rewards, values, next_values, terminations, truncations,
                                 args.gamma, 1.0)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, *action_space.shape)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        # Normalised over the batch, as in Spinning Up. Dividing by the std changes nothing in
        # the step, whose length δ sets; subtracting the mean is a baseline: it changes this
        # batch's estimate, its direction too, but not its expectation, since E[∇ log π] = 0
        # (apart from the small bias of taking the mean from the same batch).
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # --- update: one trust-region step on θ, then vf_iters critic steps on φ ---
        stats = trpo_step(agent, policy_params, b_obs, b_actions, b_advantages, args)
        v_losses = []
        for _ in range(args.vf_iters):
            v_loss = value_loss(agent.get_value(b_obs), b_returns)
            vf_optimizer.zero_grad()
            v_loss.backward()
            vf_optimizer.step()
            v_losses.append(v_loss.detach())

        # --- log: the value loss is the mean over the critic steps of this update ---
        losses = {**stats, "value_loss": torch.stack(v_losses).mean().item()}
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        # Explained variance 1 − Var[R − V]/Var[R]: 1 is a perfect critic, ≤ 0 a useless one.
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        sps = global_step / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration == num_iterations:
            last_print = time.time()
            recent = [r for _, r in episodic_returns[-20:]]
            mean_return = f"{np.mean(recent):8.2f}" if recent else "     n/a"
            eta = int((num_iterations * batch_size - global_step) / sps)
            print(f"step {global_step:>9,}/{num_iterations * batch_size:,} | return (last 20) "
                  f"{mean_return} | SPS {sps:6.0f} | ETA {eta // 60}m{eta % 60:02d}s", flush=True)
        if run.check_update(losses, global_step, next_obs_np):  # NaN, inf; checkpoints; Ctrl-C
            break
    envs.close()
    return run.end(global_step, episodic_returns=episodic_returns)


# --- tooling: input checks, guard rails, Ctrl-C, checkpoints, evaluation, the command line ---
# Nothing below is part of the learning algorithm: a first reading can stop here.


def fail(message):
    """Stop with a one-line error and exit code 1."""
    raise SystemExit(f"{os.path.basename(__file__)}: error: {message}")


def check_args(args):
    """Refuse a bad setup in one line, before anything is built; return the env made to check it."""
    # Before 1.4, the vector RecordEpisodeStatistics miscounts episodes under SAME_STEP autoreset.
    if tuple(map(int, gym.__version__.split(".")[:2])) < (1, 4):
        fail(f"needs gymnasium 1.4 or newer, found {gym.__version__}: pip install -U gymnasium")
    if args.cuda and not torch.cuda.is_available():
        fail("--cuda: torch finds no usable GPU; leave out --cuda to train on the CPU")
    for flag, module in (("capture_video", "moviepy"), ("track", "wandb")):
        if getattr(args, flag) and not importlib.util.find_spec(module):
            fail(f"--{flag.replace('_', '-')} needs {module}: pip install {module}")
    if args.capture_video and sys.platform == "linux":  # MuJoCo renders with no display too
        os.environ.setdefault("MUJOCO_GL", "egl")
    may_be_0 = "seed gamma gae_lambda ent_coef vf_coef checkpoint_every eval_episodes eval_seed"
    for name, value in asdict(args).items():  # type, not isinstance: a bool is no number here
        bound = ">= 0" if name in may_be_0.split() else "positive"
        if type(value) in (int, float) and (value < 0 or value == 0 and bound == "positive"):
            fail(f"--{name.replace('_', '-')} must be {bound}")
    if max(args.gamma, args.gae_lambda) > 1:
        fail("--gamma and --gae-lambda must lie in [0, 1]")
    batch_size = args.num_envs * args.num_steps
    if batch_size > args.total_timesteps:
        fail("--total-timesteps is less than one batch of --num-envs × --num-steps steps")
    try:
        env = make_env(args.env_id)
    except (gym.error.Error, ImportError) as error:  # Gymnasium's message says why
        fail(f"--env-id {args.env_id}: {error} (an env of your own is given as module:EnvId)")
    if len(env.observation_space.shape or ()) != 1:
        fail(f"{args.env_id} has observations {env.observation_space}; the script needs vectors")
    space = env.action_space
    if not isinstance(space, gym.spaces.Box | gym.spaces.Discrete) or len(space.shape) > 1 or (
            getattr(space, "start", 0) != 0):
        fail(f"{args.env_id} has actions {space}; the script needs Discrete(n) or a flat Box (for "
             "Discrete(n, start=k), in make_env, wrap the env in "
             "gym.wrappers.TransformAction(env, lambda a: a + k, gym.spaces.Discrete(n)))")
    if args.total_timesteps % batch_size and not args.eval_checkpoint:
        print(f"note: trains {args.total_timesteps // batch_size * batch_size:,} steps, the whole "
              f"batches of {batch_size} in --total-timesteps", file=sys.stderr)
    return env


class Run:
    """The tooling that `train` calls: the run's folder and logs, checkpoints and --resume, the
    guard rails, Ctrl-C and the end of the run. A guard rail stops a run whose numbers stopped
    making sense with one line that says why, instead of a traceback far from the cause or a
    silently ruined run; the logs are flushed, and the checkpoint (and model.pt with
    --save-model) keeps the last finite weights."""

    stopping = False  # Ctrl-C was pressed

    def __init__(self, args, agent, envs, *objects):
        """Open the run's folder and its TensorBoard writer, mirrored to W&B with --track; take
        the objects that the rest of the run depends on (the last ones are given again to
        `check_update`). A new run gets a folder of its own, even where another run took its name.
        With --resume, the run reopens its checkpoint's folder (TensorBoard drops what was logged
        there after the checkpoint, which the run logs again), and the checkpoint's state is put
        into the objects, in place; `last_step` is the step to go on from, and `start_time` the
        time the run began, less the time it was stopped (SPS counts the run's own time)."""
        self.args, self.agent, self.objects = args, agent, [agent, envs, *objects]
        self.steps_accepted = 0  # updates whose line search accepted a step
        self.updates, saved = 0, args.resume and torch.load(args.resume, weights_only=False)
        if saved:  # pickled objects: loading a checkpoint runs code, so trust the file
            changed = {k for k, v in saved["args"].items() if getattr(args, k) != v} - set(
                "exp_name log_dir save_model checkpoint_every resume eval_episodes eval_seed "
                "eval_checkpoint capture_video track wandb_project_name wandb_entity".split())
            if changed:
                flag = changed.pop().replace("_", "-")
                fail(f"--resume goes on with the run's own flags; leave out --{flag}")
            self.dir = os.path.dirname(args.resume)
        else:  # the env id without the module of module:EnvId: no ':' in a folder name
            name = (f"{args.env_id.rpartition(':')[2]}__{args.exp_name}__{args.seed}__"
                    f"{int(time.time())}")
            self.dir = os.path.join(args.log_dir, name)
            try:
                os.makedirs(self.dir)
            except FileExistsError:  # a run started in the same second: another folder
                self.dir = tempfile.mkdtemp(prefix=name + "_", dir=args.log_dir)
        if args.track:  # before the writer: W&B mirrors what it writes
            import wandb
            name = os.path.basename(self.dir)
            wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=name,
                       id=name, config=asdict(args), resume="allow", dir=self.dir,
                       sync_tensorboard=True)
        self.writer = SummaryWriter(self.dir, purge_step=saved and saved["global_step"] + 1)
        table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
        self.writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
        exact = not isinstance(envs.unwrapped.envs[0].unwrapped, gym.utils.EzPickle)
        if saved:
            for obj, state in zip(self.objects, saved["state"], strict=True):
                # Box2D and MuJoCo envs pickle as the arguments that made them (EzPickle), not
                # their state: they and their observations stay new, and new episodes begin.
                if not exact and isinstance(obj, gym.vector.VectorEnv | np.ndarray):
                    continue
                if isinstance(obj, list | np.ndarray):
                    obj[:] = state  # the returns of the episodes so far; the next observations
                else:
                    obj.__dict__.update(state.__dict__)  # the agent, optimisers, envs, ...
            torch.set_rng_state(saved["rng"])
            if not exact:
                print(f"note: {args.env_id} cannot be saved mid-episode, so the run goes on with "
                      "new episodes, not exactly as if never stopped", file=sys.stderr)
        self.last_step = saved["global_step"] if saved else 0
        self.start_time = time.time() - (saved["seconds"] if saved else 0)
        self.last_weights = nn.utils.parameters_to_vector(agent.parameters())
        signal.signal(signal.SIGINT, self.ctrl_c)

    def save(self, global_step):
        """Write <run>/checkpoint.pt, under another name first and then renamed: a kill during
        the write leaves the last checkpoint whole."""
        self.writer.flush()  # the events up to here: a resumed run does not log them again
        # Besides the envs' generators (in their state), torch's is the only one drawn from:
        # Python's and NumPy's global ones are seeded, never used.
        try:
            torch.save({"args": asdict(self.args), "global_step": global_step,
                        "state": self.objects, "rng": torch.get_rng_state(),
                        "seconds": time.time() - self.start_time}, f"{self.dir}/checkpoint.tmp")
            os.replace(f"{self.dir}/checkpoint.tmp", f"{self.dir}/checkpoint.pt")
        except Exception as error:  # an object that does not pickle, as a class made in a function
            self.args.checkpoint_every = 0  # said once; the run goes on without checkpoints
            print(f"warning: no checkpoint: {error}", file=sys.stderr)

    def ctrl_c(self, *_):
        """The first Ctrl-C stops the run after the current update; a second one at once."""
        self.stopping = True
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("Ctrl-C: stopping after this update (again: at once)", file=sys.stderr)

    def check_env(self, obs, reward, infos, global_step):
        """After each env step, before anything is stored: NaN or inf from the env stops the run."""
        final_obs = [o.sum() for o in infos.get("final_obs", []) if o is not None]
        # A sum is finite only if all its terms are: one cheap test per step.
        if not math.isfinite(obs.sum() + reward.sum() + sum(final_obs)):
            self.end(global_step, f"{self.args.env_id} returned NaN or inf at step "
                     f"{global_step:,} (an observation or a reward); the env needs fixing")

    def check_update(self, losses, global_step, *latest):
        """After each update: a loss or a weight that became NaN or inf stops the run; an
        absurd approx-KL (above 1, where 0.01 to 0.05 is usual) gets a warning. Every
        --checkpoint-every updates, the checkpoint, with `latest` (objects rebound since `start`)
        in place of the last ones given there. True once Ctrl-C asked to stop."""
        weights = nn.utils.parameters_to_vector(self.agent.parameters()).detach()  # (n_weights,)
        if not math.isfinite(sum(losses.values()) + weights.sum()):
            self.end(global_step, f"a loss or weight became NaN or inf in the update ending "
                     f"at step {global_step:,}; a learning rate too large? rewards of huge scale?")
        self.last_step, self.last_weights = global_step, weights
        self.steps_accepted += losses["step_accepted"]
        if losses["approx_kl"] > 1:
            print(f"warning: the update ending at step {global_step:,} moved the policy far "
                  f"(approx-KL {losses['approx_kl']:.3g}); is the learning rate too large?",
                  file=sys.stderr)
        self.objects[len(self.objects) - len(latest):] = latest
        self.updates += 1
        if self.args.checkpoint_every and self.updates % self.args.checkpoint_every == 0:
            self.save(global_step)
        return self.stopping

    def end(self, global_step, error="", episodic_returns=()):
        """Every run ends here: after training, after a Ctrl-C, or at a guard rail's `error`,
        which first puts back the last finite weights (from before a diverged update). Save the
        model with --save-model, evaluate it after training, close the logs; return a summary."""
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a Ctrl-C now stops at once
        if error:
            nn.utils.vector_to_parameters(self.last_weights, self.agent.parameters())
            global_step = self.last_step
        if self.args.checkpoint_every:  # also at a guard rail's stop: the last finite weights
            self.save(global_step)
        self.agent.cpu()  # the checkpoint and the evaluation are on the CPU
        if self.args.save_model:  # only tensors, numbers, strings: safe for torch.load
            torch.save({"model": self.agent.state_dict(), "args": asdict(self.args),
                        "global_step": global_step}, f"{self.dir}/model.pt")
            print(f"model saved to {self.dir}/model.pt (the weights of step "
                  f"{global_step:,})")
        if global_step and not self.steps_accepted:
            print("warning: the line search rejected the step of every update: the policy never "
                  "moved (a zero gradient? is every advantage 0?)", file=sys.stderr)
        if error:
            fail(error)
        if self.stopping:
            go_on = self.args.checkpoint_every and f"; to go on: --resume {self.dir}/checkpoint.pt"
            print(f"interrupted at step {global_step:,}{go_on or ''}", file=sys.stderr)
            raise SystemExit(130)  # the shell's code for "stopped by Ctrl-C"
        eval_returns = []
        if self.args.eval_episodes:
            eval_returns = evaluate(self.agent, self.args, self.dir)
        for i, episode_return in enumerate(eval_returns):
            self.writer.add_scalar("eval/episodic_return", episode_return, i)
        self.writer.close()
        return {"run_dir": self.dir, "global_step": global_step, "agent": self.agent,
                "episodic_returns": episodic_returns, "eval_returns": eval_returns}


def evaluate(agent, args, folder):
    """Play --eval-episodes episodes, each cut at 10,000 steps at most and filmed into
    <folder>/videos with --capture-video; print and return their returns. The action is the
    most likely one (Discrete) or the mean μ_θ(s), clipped to the bounds (Box)."""
    video = {"render_mode": "rgb_array"} if args.capture_video else {}
    env = gym.wrappers.TimeLimit(make_env(args.env_id, **video), 10_000)  # or it may never end
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, f"{folder}/videos", lambda _: True)
    env = gym.wrappers.RecordEpisodeStatistics(env, args.eval_episodes)  # keeps every return
    seed = args.seed + 10_000 if args.eval_seed is None else args.eval_seed
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)  # the first seed fixes them all
        done = False
        while not done:
            out = agent.actor(torch.as_tensor(obs, dtype=torch.float32)).detach().numpy()
            space = env.action_space  # out: logits (Discrete) or the mean (Box), (act_dim,)
            action = np.clip(out, space.low, space.high) if agent.continuous else int(out.argmax())
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    env.close()
    print(f"{args.env_id}: mean return {np.mean(env.return_queue):.2f} ± "
          f"{np.std(env.return_queue):.2f} over {args.eval_episodes} episodes (seed {seed})")
    return np.ravel(env.return_queue).tolist()  # floats (a reward may be an array of one)


def load_agent(path, args=None):
    """The Agent saved in a model.pt (--save-model), for code of your own
    (docs/usage.md, "Long runs"); `args` are the flags to build it with, by default those saved
    with it. model.pt holds "model" (the state_dict), "args" (the flags, a dict) and
    "global_step"."""
    saved = torch.load(path, weights_only=True)  # tensors, numbers, strings only: safe to load
    args = args or Args(**saved["args"])
    env = make_env(args.env_id)
    agent = Agent(env.observation_space.shape[0], env.action_space, args.hidden_size)
    agent.load_state_dict(saved["model"])
    return agent


def main():
    """Train; go on with a run from its --resume checkpoint; or evaluate the policy saved in
    --eval-checkpoint. Both files give the flags saved in them unless given now (so an
    evaluation's numbers are those of the evaluation after training)."""
    args = tyro.cli(Args)
    path = args.resume or args.eval_checkpoint
    try:  # no such file; another script's file; weights that do not fit the env or networks
        if path:
            saved = torch.load(path, weights_only=not args.resume)["args"]
            args = tyro.cli(Args, default=Args(**saved))
        if args.eval_checkpoint:
            check_args(args)
            agent = load_agent(path, args)
    except (OSError, TypeError, RuntimeError, AttributeError) as error:
        words = " ".join(str(error).split("\n\t")[:2]).split()  # to the first layer that misfits
        fail(f"cannot load {path}: {' '.join(words)}")
    if args.eval_checkpoint:
        return evaluate(agent, args, os.path.dirname(path))
    return train(args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # a Ctrl-C outside the training loop, or a second one inside it
        raise SystemExit(130) from None
