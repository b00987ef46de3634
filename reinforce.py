"""REINFORCE: the Monte-Carlo policy gradient, no critic, in one file.

    REINFORCE, one iteration of `train`:
    1. Play complete episodes with π_θ in N envs, --batch-size steps or more (`--- rollout ---`).
    2. Compute the rewards-to-go G_t of each step, within its episode (`compute_returns`).
    3. With `--norm-returns`, normalise G over the batch (`--- returns ---`).
    4. Take one Adam step on the loss −(1/B) Σ_t log π_θ(a_t|s_t) G_t (`reinforce_loss`).
    5. Measure how far the step moved the policy, then log (`--- log ---`).

The first file of the reading order reinforce.py → vpg.py → trpo.py → ppo_discrete.py →
ppo_continuous.py. Its next step is docs/reinforce-to-vpg.html.

    python reinforce.py                                     # CartPole-v1, 500k steps
    python reinforce.py --help                              # every flag, with its meaning
    python reinforce.py --save-model                        # (tooling) writes runs/<run>/model.pt
    python reinforce.py --eval-checkpoint runs/<run>/model.pt --capture-video  # (tooling)
    tensorboard --logdir runs

Flags marked (tooling) come from tooling.py: a copy of this file alone lacks them.
"""

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

ALGORITHM, RELEASE = "reinforce", "0.5.0"  # this script, and pgref's release
SPACES = "vector", "Discrete or Box"  # the observations and actions it takes


@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "CartPole-v1"
    """Gymnasium env with Discrete or Box actions; module:EnvId for an env of your own"""
    hidden_size: int = 64
    """units in each of the two tanh hidden layers of the policy network"""
    total_timesteps: int = 500_000
    """environment steps to train for, summed over all envs"""
    learning_rate: float = 3e-3
    """Adam step size α of the policy; typical 1e-4 to 1e-2"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    batch_size: int = 5000
    """each batch holds complete episodes, at least this many steps in all"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    norm_returns: bool = False
    """normalise the batch's returns G_t to mean 0, std 1: a baseline and a rescaling"""

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
    """The policy π_θ(a|s), a tanh MLP: Categorical logits (Discrete) or a Gaussian mean (Box)."""

    def __init__(self, obs_dim: int, action_space: gym.Space, hidden_size: int = 64):
        super().__init__()
        self.continuous = isinstance(action_space, gym.spaces.Box)
        act_dim = action_space.shape[0] if self.continuous else int(action_space.n)
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        if self.continuous:
            self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

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



def compute_returns(rewards, dones, gamma: float):
    """Discounted rewards-to-go, each within its episode. rewards, dones: (T, N) time-major or (T,).
    dones[t] = 1 at the last step of an episode. The sum never crosses into the next one:

        G_t = r_t + γ (1 − done_t) G_{t+1}   =   Σ_{l ≥ 0, within the episode} γ^l r_{t+l}
    """
    returns = torch.zeros_like(rewards)
    next_return = torch.zeros_like(rewards[0])  # G_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        next_return = rewards[t] + gamma * (1.0 - dones[t]) * next_return
        returns[t] = next_return
    return returns


def reinforce_loss(logprob, returns):
    """The REINFORCE surrogate loss on inputs (B,). Its value is no measure of performance."""
    # math: \hat g = \frac{1}{|D|} \sum_\tau \sum_t \nabla_\theta \log \pi_\theta(a_t|s_t)\, G_t
    # The mean over B steps, not |D| episodes, rescales ĝ by |D|/B, which falls as episodes grow.
    # math: L(\theta) = -\frac{1}{B}\sum_t \log \pi_\theta(a_t|s_t)\, G_t
    # math: -\nabla_\theta L = \frac{|D|}{B}\, \hat g
    return -(logprob * returns).mean()


def train(args: Args, writer: SummaryWriter | None = None, hook=None) -> dict:
    """Train and return the loop's `state()`. The tooling passes its own `writer` and `hook`."""
    # --- seeding: Python, NumPy, torch (action sampling) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    action_space = envs.single_action_space
    agent = make_agent(args, envs.single_observation_space, action_space).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns = 0, []

    # The loop's state, by name. Add here and below any state you add, or a resume loses it.
    def state() -> dict:
        return {"agent": agent, "optimizer": optimizer,
                "envs": envs, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:
        loop = hook(state())
        agent, optimizer, envs = loop["agent"], loop["optimizer"], loop["envs"]
        global_step, episodic_returns = loop["global_step"], loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    start_time, start_step, last_print = time.time(), global_step, 0
    while global_step < args.total_timesteps:
        # --- rollout: complete episodes of the current policy π_θ, at least batch_size steps ---
        # Episodes play to their end. Keeping only those that finish first would favour short ones.
        next_obs_np, _ = envs.reset(seed=args.seed if global_step == 0 else None)
        next_obs_np = next_obs_np.astype(np.float32)
        iteration_start, batch_steps = global_step, 0
        # One entry per step of the N envs. keep marks the steps that enter the batch.
        obs_np, actions_np, rewards_np, dones_np, keep_np = [], [], [], [], []
        collecting = np.ones(args.num_envs, dtype=bool)
        with torch.inference_mode():  # no gradient: the update recomputes log π
            while collecting.any():
                global_step += args.num_envs
                obs_np.append(next_obs_np)
                next_obs = torch.from_numpy(next_obs_np).to(device)
                action, _, _ = agent.get_action(next_obs)
                action_np = action.cpu().numpy()
                actions_np.append(action_np)
                # The env gets a Gaussian sample clipped. The gradient needs log π of the raw one.
                env_action = action_np
                if agent.continuous:
                    env_action = np.clip(action_np, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                rewards_np.append(reward)
                dones_np.append(terminated | truncated)
                keep_np.append(collecting.copy())
                next_obs_np = next_obs_np.astype(np.float32)
                batch_steps += collecting.sum()
                for i in np.flatnonzero(dones_np[-1] & collecting):
                    episode_return, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, float(episode_return)))
                    collecting[i] = batch_steps < args.batch_size
                if global_step >= args.total_timesteps and not episodic_returns:
                    raise SystemExit(f"reinforce.py: error: no episode of {args.env_id} ended in "
                                     "--total-timesteps steps; REINFORCE learns from complete "
                                     "episodes: in make_env, give the env a time limit: "
                                     "gym.make(env_id, max_episode_steps=1000)")

        # --- returns: rewards-to-go G_t of each step, within its episode ---
        obs, actions, rewards, dones, keep = (
            torch.tensor(np.array(x), device=device)  # (T, N, ...), T the rollout's length
            for x in (obs_np, actions_np, rewards_np, dones_np, keep_np))
        returns = compute_returns(rewards.float(), dones.float(), args.gamma)
        b_obs, b_actions, b_returns = obs[keep], actions[keep], returns[keep]  # (B, ...)
        if args.norm_returns:
            b_returns = (b_returns - b_returns.mean()) / (b_returns.std() + 1e-8)

        # --- update: one policy-gradient step on θ ---
        _, logprob, entropy = agent.get_action(b_obs, b_actions)
        pg_loss = reinforce_loss(logprob, b_returns)
        optimizer.zero_grad()
        pg_loss.backward()
        optimizer.step()
        # How far the step moved π: the k3 estimate of KL[π_old ‖ π_θ], with r = π_θ / π_old.
        # math: k_3 = \mathbb{E}_t[(r_t - 1) - \log r_t]
        with torch.no_grad():
            _, new_logprob, _ = agent.get_action(b_obs, b_actions)
            logratio = new_logprob - logprob.detach()
            approx_kl = ((logratio.exp() - 1) - logratio).mean()

        # --- log ---
        losses = {"policy_loss": pg_loss.item(), "entropy": entropy.mean().item(),
                  "approx_kl": approx_kl.item()}
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        batch_fraction = batch_steps / (global_step - iteration_start)
        writer.add_scalar("charts/batch_fraction", batch_fraction, global_step)
        sps = (global_step - start_step) / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or global_step >= args.total_timesteps:
            last_print = time.time()
            recent = [r for _, r in episodic_returns[-20:]]
            mean_return = f"{np.mean(recent):8.2f}" if recent else "     n/a"
            eta = int(max(args.total_timesteps - global_step, 0) / sps)
            print(f"step {global_step:>9,}/{args.total_timesteps:,} | return (last 20) "
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
