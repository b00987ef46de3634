"""PPO-clip on VPG's critic and rollout: the step from vpg.py (or trpo.py) to ppo_discrete.py.

    python steps/ppo_1_clip.py                          # CartPole-v1, 500k steps
    python steps/ppo_1_clip.py --env-id Pendulum-v1     # Box actions too, as vpg.py
    tensorboard --logdir runs

What changes from vpg.py, one idea: many policy steps per batch on a clipped surrogate. VPG's
estimate of the gradient holds only at the policy that collected the batch, so VPG takes one step
per batch. The surrogate weights each advantage by the ratio r_t(θ) = π_θ(a_t|s_t)/π_θ_old(a_t|s_t),
which makes it an estimate away from θ_old too. Its gradient at θ_old is VPG's. Clipped at 1 ± ε
inside a minimum, moving r beyond the clip earns nothing, so one batch serves up to K = 80 Adam
steps (`--update-epochs`). The clip does not bound r, so the steps stop once the k3 estimate of
KL[π_θ_old ‖ π_θ] exceeds `--target-kl`. For it the rollout stores log π_θ_old(a|s), and the step
size falls from vpg.py's 3e-3 to Spinning Up's 3e-4, as 80 steps take the place of one.

What changes from trpo.py, one idea: a clipped objective in place of the trust region. TRPO keeps
each update inside a KL trust region. It takes one step along the natural gradient, found by
conjugate gradient and checked by a line search. PPO gets a similar caution from first-order Adam
steps on the clipped surrogate, with the KL as a stop rather than a constraint."""

import functools
import math
import random
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter

ALGORITHM, RELEASE = "ppo_1_clip", "0.5.0"  # this script, and pgref's release
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
    learning_rate: float = 3e-4
    """Adam step size α of the policy"""
    update_epochs: int = 80
    """K, full-batch Adam steps on the policy per batch, at most"""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective; typical 0.1 to 0.3"""
    target_kl: float | None = 0.015
    """stop an update's policy steps once the k3 KL exceeds it"""
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
    """The one place where an environment is made: training, evaluation and the checks call it."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # Same-step autoreset: no action is spent on a reset.
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
    """Actor π_θ(a|s) and critic V_φ(s), tanh MLPs. The actor outputs Categorical logits (Discrete)
    or a diagonal Gaussian's mean (Box), whose log-std is learned and independent of the state."""

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
        """The greedy action for one observation (obs_dim,), and None: this policy has no memory."""
        out = self.actor(torch.as_tensor(obs, dtype=torch.float32)).detach().numpy()
        return out if self.continuous else int(out.argmax()), None

    def get_action(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,) or (B, act_dim), log π(a|s) (B,), entropy (B,)."""
        if self.continuous:
            mean = self.actor(obs)  # μ_θ(s), (B, act_dim)
            std = self.actor_logstd.exp().expand_as(mean)  # σ, (B, act_dim): state-independent
            if action is None:
                action = torch.normal(mean, std)
            # math: \log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)
            # math: \log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
            log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                           - math.log(math.sqrt(2 * math.pi)))
            logprob = log_density.sum(-1)
            # math: H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
            return action, logprob, entropy
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor(obs)  # z: π_θ(a|s) is the softmax of z
        log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
        if action is None:
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy


def make_agent(args: Args, observation_space, action_space) -> Agent:
    """The Agent for these spaces and flags: `train` builds it so, and tooling.py too."""
    return Agent(observation_space.shape[0], action_space, args.hidden_size)



def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16). Tensors in and out are
    (T, N). next_values[t] = V(s_{t+1}) is the value of the observation that really followed step t.

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0"""
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])  # A_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def surrogate(ratio, advantages, clip_coef):
    """The clipped surrogate L^CLIP(θ) on B steps, to maximise (Schulman et al. 2017, eq. 7)."""
    # A sample gives no gradient only where the clipped term is the smaller one.
    # math: L^{CLIP}(\theta) = \frac{1}{B}\sum_t \min(r_t \hat A_t,\ \bar r_t \hat A_t)
    # math: \bar r_t = \mathrm{clip}(r_t(\theta),\ 1 - \epsilon,\ 1 + \epsilon)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    return torch.min(ratio * advantages, clipped_ratio * advantages).mean()


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
    policy_params = [p for name, p in agent.named_parameters() if not name.startswith("critic")]
    pi_optimizer = torch.optim.Adam(policy_params, lr=args.learning_rate, eps=1e-5, fused=True)
    vf_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_learning_rate, eps=1e-5,
                                    fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)
    actions_np = np.zeros((*shape, *action_space.shape),
                          dtype=np.float32 if agent.continuous else np.int64)
    logprobs_np, values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(6))

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None

    # The loop's state, by name. Add here and below any state you add, or a resume loses it.
    def state() -> dict:
        return {"agent": agent, "pi_optimizer": pi_optimizer, "vf_optimizer": vf_optimizer,
                "envs": envs, "next_obs": next_obs_np, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:
        loop = hook(state())
        agent, pi_optimizer = loop["agent"], loop["pi_optimizer"]
        vf_optimizer, envs, next_obs_np = loop["vf_optimizer"], loop["envs"], loop["next_obs"]
        global_step, episodic_returns = loop["global_step"], loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    if next_obs_np is None:
        next_obs_np, _ = envs.reset(seed=args.seed)
        next_obs_np = next_obs_np.astype(np.float32)
    start_time, start_step, last_print = time.time(), global_step, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)
                action, logprob, _ = agent.get_action(next_obs)
                value = agent.get_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob.cpu().numpy(), value.cpu().numpy())
                # The env gets a Gaussian sample clipped. The gradient needs log π of the raw one.
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
        obs, actions, logprobs, values, final_values, rewards, terminations, truncations = (
            torch.tensor(x, device=device)  # (T, N, ...) copies of arrays the next rollout refills
            for x in (obs_np, actions_np, logprobs_np, values_np, final_values_np, rewards_np,
                      terminations_np, truncations_np))
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            next_value = agent.get_value(next_obs)  # V(s_T), (N,): for paths cut by the batch end
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
        # truncated. After a termination it is the reset observation's value, masked in GAE.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        advantages, _ = compute_gae(rewards, values, next_values, terminations, truncations,
                                    args.gamma, args.gae_lambda)
        # The critic regresses on the discounted rewards-to-go: GAE's returns with λ = 1.
        # math: \hat R_t = \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})
        _, returns = compute_gae(rewards, values, next_values, terminations, truncations,
                                 args.gamma, 1.0)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, *action_space.shape)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_logprobs = logprobs.reshape(-1)
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # --- update: up to K policy steps on the clipped surrogate, then vf_iters critic steps ---
        for _epoch in range(args.update_epochs):
            _, logprob, entropy = agent.get_action(b_obs, b_actions)
            # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
            logratio = logprob - b_logprobs
            ratio = logratio.exp()
            # Early stop: the policy has already moved far from π_old.
            kl = ((ratio - 1) - logratio).mean()
            if args.target_kl is not None and kl > args.target_kl:
                break
            pg_loss = -surrogate(ratio, b_advantages, args.clip_coef)
            pi_optimizer.zero_grad()
            pg_loss.backward()
            pi_optimizer.step()
        v_losses = []
        for _ in range(args.vf_iters):
            v_loss = value_loss(agent.get_value(b_obs), b_returns)
            vf_optimizer.zero_grad()
            v_loss.backward()
            vf_optimizer.step()
            v_losses.append(v_loss.detach())
        # How far the update moved π: the k3 estimate of KL[π_old ‖ π_θ], with r = π_θ / π_old.
        # math: k_3 = \mathbb{E}_t[(r_t - 1) - \log r_t]
        with torch.no_grad():
            _, new_logprob, _ = agent.get_action(b_obs, b_actions)
            logratio = new_logprob - b_logprobs
            approx_kl = ((logratio.exp() - 1) - logratio).mean()

        # --- log: the value loss is the mean over the critic steps of this update ---
        losses = {"policy_loss": pg_loss.item(), "value_loss": torch.stack(v_losses).mean().item(),
                  "entropy": entropy.mean().item(), "approx_kl": approx_kl.item()}
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
