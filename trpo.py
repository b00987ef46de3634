"""Trust region policy optimisation (TRPO) with a learned value baseline and GAE-λ, in one file.

    TRPO, one iteration of `train`:
    1. Step the N envs T times with π_θ. Store obs, a, r and V(s) (`--- rollout ---`).
    2. At a truncation, store V(final obs) to bootstrap the cut episode (`final_values`).
    3. Bootstrap the batch's end with V(s_T). Compute the GAE-λ advantages Â (`compute_gae`).
    4. Compute the critic's targets R̂, GAE's returns with λ = 1 (`compute_gae`).
    5. Normalise Â over the batch (`--- flatten the batch ---`).
    6. Take one natural-gradient step on the policy, scaled to the KL limit δ and checked by a
       line search (`trpo_step`).
    7. Take --vf-iters Adam steps on the critic's loss (`value_loss`), then log (`--- log ---`).

    python trpo.py                                          # CartPole-v1, 500k steps
    python trpo.py --env-id HalfCheetah-v4 --total-timesteps 1000000
    python trpo.py --help                                   # every flag, with its meaning
    python trpo.py --save-model                             # (tooling) writes runs/<run>/model.pt
    python trpo.py --eval-checkpoint runs/<run>/model.pt --capture-video  # (tooling)
    tensorboard --logdir runs

What changes from vpg.py, one idea: a bounded step, and only the policy's update. TRPO maximises
the surrogate L(θ) = E[π_θ/π_θ_old · Â] subject to a mean KL[π_θ_old ‖ π_θ] ≤ δ (`trpo_step`)."""

import copy
import functools
import math
import random
import sys
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter

ALGORITHM, RELEASE = "trpo", "0.5.0"  # this script, and pgref's release
SPACES = "vector", "Discrete or Box"  # the observations and actions it takes


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
    """Adam step size of the critic"""
    vf_iters: int = 80
    """full-batch gradient steps on the critic per batch"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 1000
    """T, steps per environment in each batch; batch size = N·T"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.97
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""

    # --- the run (tooling.py, where importable, adds its own flags) ---
    seed: int = 1
    """seed ≥ 0 of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found); small networks often run as fast on a CPU"""


def make_env(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # SAME_STEP: an episode's real last observation is in infos["final_obs"], for the bootstrap.
    envs = gym.vector.SyncVectorEnv([functools.partial(make_env, env_id)] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
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
    def __init__(self, obs_dim: int, action_space: gym.Space, hidden_size: int = 64):
        super().__init__()
        self.continuous = isinstance(action_space, gym.spaces.Box)
        act_dim = action_space.shape[0] if self.continuous else int(action_space.n)
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        if self.continuous:
            self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def greedy_action(self, obs, memory=None):
        """For one obs: the likeliest action (Discrete), or the unclipped mean μ_θ(s) (Box)."""
        out = self.actor(torch.as_tensor(obs, dtype=torch.float32)).detach().numpy()
        return out if self.continuous else int(out.argmax()), None

    def get_action(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,) or (B, act_dim), log π(a|s) (B,), entropy (B,).
        Samples an action unless one is given (the update re-evaluates stored actions)."""
        if self.continuous:
            mean = self.actor(obs)
            std = self.actor_logstd.exp().expand_as(mean)
            if action is None:
                action = torch.normal(mean, std)
            # Independent action dimensions: log-probs add up over the last axis, as do entropies.
            # math: \log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)
            # math: \log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
            log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                           - math.log(math.sqrt(2 * math.pi)))
            logprob = log_density.sum(-1)
            # math: H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
            return action, logprob, entropy
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor(obs)
        log_pi = logits - logits.logsumexp(-1, keepdim=True)
        if action is None:
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy


def make_agent(args: Args, observation_space, action_space) -> Agent:
    return Agent(observation_space.shape[0], action_space, args.hidden_size)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """GAE (Schulman et al. 2016, eq. 16). Inputs (T, N), time-major. Returns (advantages, returns).
    next_values[t] = V(s_{t+1}) is the value of the observation that really followed step t.

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0
    """
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def surrogate(logprob, old_logprob, advantages):
    """The surrogate objective L(θ) on a batch of B steps, to maximise. Inputs have shape (B,).
    At θ = θ_old, its gradient g is vpg.py's policy gradient."""
    # math: L(\theta) = \frac{1}{B}\sum_t r_t(\theta)\, \hat A_t
    # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
    return ((logprob - old_logprob).exp() * advantages).mean()


def mean_kl(agent, obs, old):
    """Mean KL[π_old(·|s) ‖ π_θ(·|s)] over obs (B, obs_dim), in closed form. `old` is at θ_old."""
    out, old_out = agent.actor(obs), old.actor(obs)
    if agent.continuous:
        logstd, old_logstd = agent.actor_logstd, old.actor_logstd
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
    return nn.utils.parameters_to_vector(torch.autograd.grad(output, params, **kwargs))


def fisher_vector_product(kl, params, damping):
    """The function v ↦ (H + cI)·v, with H the (n, n) Hessian of the scalar `kl` with respect to
    θ = `params` (n weights in all), never formed. At θ_old, H is the Fisher information matrix."""
    kl_grad = flat_grad(kl, params, create_graph=True)  # (n,), 0 at θ_old, differentiable again
    # math: H v = \nabla_\theta \big( (\nabla_\theta \overline{\mathrm{KL}})^\top v \big)
    return lambda v: flat_grad(kl_grad @ v, params, retain_graph=True) + damping * v


def conjugate_gradient(matrix_vector_product, b, iters):
    """Solve A x = b for a symmetric positive-definite A known only through A·v, by at most
    `iters` conjugate-gradient steps from x = 0. It also stops once the residual is near zero."""
    x, r, p = torch.zeros_like(b), b, b  # Residual r = b − A x, search direction p.
    r_dot_r = r @ r
    for _ in range(iters):
        if r_dot_r < 1e-10:
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


@torch.no_grad()
def line_search(params, full_step, acceptable, backtrack_coef, backtrack_iters):
    """Try θ = θ_old + b^k · full_step, b = backtrack_coef, for k = 0, 1, ..., backtrack_iters − 1.
    Keep the first θ that `acceptable()` accepts and return k, or else θ_old and backtrack_iters."""
    old_params = nn.utils.parameters_to_vector(params)
    for k in range(backtrack_iters):
        nn.utils.vector_to_parameters(old_params + backtrack_coef**k * full_step, params)
        if acceptable():
            return k
    nn.utils.vector_to_parameters(old_params, params)
    return backtrack_iters


def trpo_step(agent, params, obs, actions, advantages, args):
    """One trust-region update, in place, of the policy's weights θ = `params` on a batch of B
    steps: obs (B, obs_dim), actions (B, ...), advantages (B,). Returns its diagnostics."""
    _, logprob, entropy = agent.get_action(obs, actions)
    old_logprob = logprob.detach()
    old = copy.deepcopy(agent)  # π_θ_old, fixed for this update
    objective = surrogate(logprob, old_logprob, advantages)
    g = flat_grad(objective, params)
    fvp = fisher_vector_product(mean_kl(agent, obs, old), params, args.cg_damping)
    x = conjugate_gradient(fvp, g, 10)  # x ≈ (H + cI)⁻¹g, the damped natural gradient
    # The longest step along x that the quadratic model of the KL keeps inside the region:
    # math: \tfrac12 \beta^2 x^\top(H+cI)x = \delta \iff \beta = \sqrt{2\delta / x^\top(H+cI)x}
    full_step = (2 * args.max_kl / (x @ fvp(x)).clamp_min(1e-30)) ** 0.5 * x

    def acceptable():  # At the current θ: inside the trust region, and L rose.
        new_logprob = agent.get_action(obs, actions)[1]
        return (mean_kl(agent, obs, old) <= args.max_kl
                and surrogate(new_logprob, old_logprob, advantages) > objective)

    backtracks = line_search(params, full_step, acceptable, 0.8, 10)
    kl = mean_kl(agent, obs, old).item()
    return {"kl": kl, "backtracks": backtracks, "entropy": entropy.mean().item(),
            "step_accepted": float(backtracks < 10)}


def value_loss(value, returns):
    # math: L^{V}(\phi) = \frac{1}{B}\sum_t \big(V_\phi(s_t) - \hat R_t\big)^2
    return ((value - returns) ** 2).mean()


def train(args: Args, writer: SummaryWriter | None = None, hook=None) -> dict:
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, action_space = envs.single_observation_space.shape[0], envs.single_action_space
    agent = make_agent(args, envs.single_observation_space, action_space).to(device)
    vf_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_learning_rate, eps=1e-5,
                                    fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)
    actions_np = np.zeros((*shape, *action_space.shape),
                          dtype=np.float32 if agent.continuous else np.int64)
    values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(5))

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None

    def state() -> dict:
        return {"agent": agent, "vf_optimizer": vf_optimizer,
                "envs": envs, "next_obs": next_obs_np, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:
        loop = hook(state())
        agent, vf_optimizer, envs = loop["agent"], loop["vf_optimizer"], loop["envs"]
        next_obs_np, global_step = loop["next_obs"], loop["global_step"]
        episodic_returns = loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    policy_params = [p for name, p in agent.named_parameters() if not name.startswith("critic")]
    if next_obs_np is None:
        next_obs_np, _ = envs.reset(seed=args.seed)
        next_obs_np = next_obs_np.astype(np.float32)
    start_time, start_step, last_print = time.time(), global_step, 0
    steps_accepted = 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)
                action, _, _ = agent.get_action(next_obs)
                value = agent.get_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], values_np[step] = action_np, value.cpu().numpy()
                # Box: the env gets the sample clipped. The gradient needs the sample's own log π.
                env_action = action_np
                if agent.continuous:
                    env_action = np.clip(action_np, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs_np = next_obs_np.astype(np.float32)
                if truncated.any():  # Bootstrap a cut episode with V of its real final observation.
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()
                for i in np.flatnonzero(infos.get("_episode", [])):
                    episode_return, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, float(episode_return)))

        # --- bootstrap and advantages ---
        obs, actions, values, final_values, rewards, terminations, truncations = (
            torch.tensor(x, device=device)  # (T, N, ...) copies of arrays the next rollout refills
            for x in (obs_np, actions_np, values_np, final_values_np, rewards_np, terminations_np,
                      truncations_np))
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            next_value = agent.get_value(next_obs)  # V(s_T), (N,): for paths cut by the batch end
        # V(s_{t+1}): the next stored value, or V(final obs) where the episode was truncated.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        advantages, _ = compute_gae(rewards, values, next_values, terminations, truncations,
                                    args.gamma, args.gae_lambda)
        # The critic's targets R̂: GAE's returns with λ = 1, bootstrapped the same way.
        # math: \hat R_t = \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})
        _, returns = compute_gae(rewards, values, next_values, terminations, truncations,
                                 args.gamma, 1.0)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, *action_space.shape)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # --- update: one trust-region step on θ, then vf_iters critic steps on φ ---
        stats = trpo_step(agent, policy_params, b_obs, b_actions, b_advantages, args)
        steps_accepted += stats["step_accepted"]
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
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        sps = (global_step - start_step) / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration == num_iterations:
            last_print = time.time()
            recent = [r for _, r in episodic_returns[-20:]]
            mean_return = f"{np.mean(recent):8.2f}" if recent else "     n/a"
            eta = int((num_iterations * batch_size - global_step) / sps)
            print(f"step {global_step:>9,}/{num_iterations * batch_size:,} | return (last 20) "
                  f"{mean_return} | SPS {sps:6.0f} | ETA {eta // 60}m{eta % 60:02d}s", flush=True)
        if hook:
            hook(state(), losses)
    if global_step > start_step and not steps_accepted:
        print("warning: the line search rejected the step of every update: the policy never "
              "moved (a zero gradient? is every advantage 0?)", file=sys.stderr)
    envs.close()
    writer.flush()
    return state()


if __name__ == "__main__":
    try:  # tooling.py, beside this file or on the path: checks, checkpoints, resume, evaluation
        import tooling
    except ModuleNotFoundError:
        print("note: training without input checks, checkpoints, --resume or evaluation: "
              "tooling.py beside this file adds them")
        train(tyro.cli(Args))
    else:
        tooling.cli(__file__)
