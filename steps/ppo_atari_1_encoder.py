"""PPO-clip from MinAtar's frames with a convolutional encoder: the first step from ppo_discrete.py
to ppo_atari.py.

    python steps/ppo_atari_1_encoder.py                    # MinAtar/Breakout-v1, 500k steps
    tensorboard --logdir runs

A file of the course's steps (docs/ppo_discrete-to-ppo_atari.html). Its figure runs it against
ppo_discrete.py on the same frames flattened into vectors, at the same settings.

What changes from ppo_discrete.py, one idea: a convolutional encoder of the frames, shared by the
actor and the critic. Each of the two is a linear head on the encoder's features (`Agent`). A
MinAtar frame is 10×10 cells, one channel per kind of object, turned channels first (`make_env`).
The defaults stay ppo_discrete.py's, but for the env (MinAtar/Breakout-v1) and --hidden-size,
which sets the encoder's features (128, MinAtar's network)."""

import functools
import random
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter

ALGORITHM, RELEASE = "ppo_atari_1_encoder", "0.5.0"  # this step's file, and pgref's release
SPACES = "image", "Discrete"  # the observations and actions it takes


# "core detail N", "continuous detail N": item N of Huang et al. 2022's lists of PPO's details.
@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "MinAtar/Breakout-v1"
    """a MinAtar game (MinAtar/<Game>-v1), or another env of (H, W, C) frames, Discrete actions"""
    hidden_size: int = 128
    """features of the encoder: the units of its linear layer after the convolution"""
    total_timesteps: int = 499_712
    """environment steps to train for, summed over all envs (whole batches: 976 of 512)"""
    learning_rate: float = 2.5e-4
    """Adam step size α of actor and critic; typical 1e-4 to 3e-3"""
    anneal_lr: bool = True
    """decay the step size linearly from α to α/I in the last of I iterations (core detail 4)"""
    update_epochs: int = 4
    """K, passes over each batch; typical 3 to 10"""
    num_minibatches: int = 4
    """minibatches per epoch; must divide the batch N·T"""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective; typical 0.1 to 0.3"""
    clip_vloss: bool = True
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's own code"""
    ent_coef: float = 0.01
    """c₂ ≥ 0, weight of the entropy bonus"""
    vf_coef: float = 0.5
    """c₁ ≥ 0, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop an update's epochs once an epoch's mean approx-KL exceeds it; typical 0.01 to 0.05"""
    norm_adv: bool = True
    """normalise advantages to mean 0, std 1 within each minibatch"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 128
    """T, steps per environment in each batch; batch size = N·T"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.95
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""
    bootstrap_truncation: bool = True
    """bootstrap a time-limit truncation with V(final obs); --no-… treats it as a termination"""

    # --- the run (tooling.py, where importable, adds its own flags) ---
    seed: int = 1
    """seed ≥ 0 of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found); small networks often run as fast on a CPU"""


def make_env(env_id: str, **kwargs) -> gym.Env:
    """A MinAtar game (registered on first use), its (H, W, C) frames turned channels first."""
    if env_id.startswith("MinAtar/") and env_id not in gym.registry:
        import minatar.gym
        minatar.gym.register_envs()
    env = gym.make(env_id, **kwargs)
    if env.spec.max_episode_steps is None:
        env = gym.wrappers.TimeLimit(env, 108_000)
    to_chw = functools.partial(np.moveaxis, source=2, destination=0)
    space = env.observation_space
    space = gym.spaces.Box(to_chw(space.low), to_chw(space.high), dtype=space.dtype)
    return gym.wrappers.TransformObservation(env, to_chw, space)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    envs = gym.vector.SyncVectorEnv([functools.partial(make_env, env_id)] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def encoder(obs_shape: tuple[int, ...], features: int) -> nn.Sequential:
    """(B, C, H, W) -> (B, features): MinAtar's network, one 3×3 convolution of 16 filters, then a
    linear layer, each followed by a ReLU."""
    channels, height, width = obs_shape
    return nn.Sequential(
        layer_init(nn.Conv2d(channels, 16, 3, stride=1)), nn.ReLU(), nn.Flatten(),
        layer_init(nn.Linear(16 * (height - 2) * (width - 2), features)), nn.ReLU(),
    )


class Agent(nn.Module):
    """Actor π_θ(a|s) (Categorical logits) and critic V_θ(s): two linear heads on one encoder."""

    def __init__(self, obs_shape: tuple[int, ...], n_actions: int, hidden_size: int = 128):
        super().__init__()
        self.encoder = encoder(obs_shape, hidden_size)
        self.actor = layer_init(nn.Linear(hidden_size, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden_size, 1), std=1.0)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.encoder(obs)).squeeze(-1)

    def greedy_action(self, obs, memory=None):
        obs = torch.as_tensor(obs, dtype=torch.float32)[None]
        return int(self.actor(self.encoder(obs)).argmax()), None

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, C, H, W) -> action (B,), log π(a|s) (B,), entropy (B,), V(s) (B,)."""
        hidden = self.encoder(obs)  # one pass of the encoder serves both heads
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor(hidden)  # z: π_θ(a|s) is the softmax of z
        log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
        if action is None:
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy, self.critic(hidden).squeeze(-1)


def make_agent(args: Args, observation_space, action_space) -> Agent:
    return Agent(observation_space.shape, int(action_space.n), args.hidden_size)



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


def ppo_loss(new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
    """The PPO loss to minimise (Schulman et al. 2017, eq. 9), and stats that carry no gradient."""
    # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()
    pg_loss = -surrogate(ratio, advantages, clip_coef)
    # Value loss, with ppo2's clip of V's change around V_old (core detail 9).
    # math: V^{clip} = V_{old} + \mathrm{clip}(V_\theta(s_t) - V_{old},\ -\epsilon,\ \epsilon)
    # math: L^{V}(\theta) = \tfrac12 \mathbb{E}_t[\max((V_\theta(s_t) - R_t)^2, (V^{clip} - R_t)^2)]
    v_loss_unclipped = (new_value - returns) ** 2
    if clip_vloss:
        v_clipped = old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()
    # math: L(\theta) = -L^{CLIP} + c_1 L^{V} - c_2\, \mathbb{E}_t[H(\pi_\theta(\cdot|s_t))]
    entropy_loss = entropy.mean()
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss
    with torch.no_grad():
        # Two estimators of KL[π_old ‖ π_θ] from samples a ~ π_old. k3 is unbiased and ≥ 0.
        # math: k_1 = -\log r_t(\theta), \qquad k_3 = (r_t(\theta) - 1) - \log r_t(\theta)
        stats = {key: value.detach() for key, value in {
            "policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy_loss,
            "old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
        }.items()}
    return loss, stats


def train(args: Args, writer: SummaryWriter | None = None, hook=None) -> dict:
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_shape, action_space = envs.single_observation_space.shape, envs.single_action_space
    agent = make_agent(args, envs.single_observation_space, action_space).to(device)
    # One optimiser for the actor and the critic. Adam's ε is 1e-5, not 1e-8 (core detail 3).
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)
    obs_np = np.zeros((*shape, *obs_shape), dtype=np.float32)
    actions_np = np.zeros(shape, dtype=np.int64)
    logprobs_np, values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(6))

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None

    # The loop's state, by name. Add here and below any state you add, or a resume loses it.
    def state() -> dict:
        return {"agent": agent, "optimizer": optimizer,
                "envs": envs, "next_obs": next_obs_np, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:
        loop = hook(state())
        agent, optimizer, envs = loop["agent"], loop["optimizer"], loop["envs"]
        next_obs_np, global_step = loop["next_obs"], loop["global_step"]
        episodic_returns = loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    if next_obs_np is None:
        next_obs_np, _ = envs.reset(seed=args.seed)
        next_obs_np = next_obs_np.astype(np.float32)
    start_time, start_step, last_print = time.time(), global_step, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        if args.anneal_lr:  # α_i = α (I − i + 1)/I in iteration i of I
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = args.learning_rate * frac

        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob.cpu().numpy(), value.cpu().numpy())
                next_obs_np, reward, terminated, truncated, infos = envs.step(action_np)
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
        terminal = (terminations if args.bootstrap_truncation
                    else torch.maximum(terminations, truncations))
        advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,
                                          args.gamma, args.gae_lambda)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, *obs_shape), actions.reshape(-1)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_logprobs = logprobs.reshape(-1)

        # --- update: K epochs, each a random split of the batch into minibatch Adam steps ---
        update_stats = []
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(batch_size, device=device)
            epoch_stats = []
            for start in range(0, batch_size, minibatch_size):
                mb_inds = b_inds[start:start + minibatch_size]
                _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs[mb_inds],
                                                                                b_actions[mb_inds])
                mb_advantages = b_advantages[mb_inds]
                # Normalised per minibatch (core detail 7).
                if args.norm_adv:
                    mb_advantages = ((mb_advantages - mb_advantages.mean())
                                     / (mb_advantages.std() + 1e-8))
                loss, stats = ppo_loss(new_logprob, b_logprobs[mb_inds], mb_advantages, new_value,
                                       b_values[mb_inds], b_returns[mb_inds], entropy,
                                       args.clip_coef, args.clip_vloss, args.ent_coef, args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                epoch_stats.append(stats)
            update_stats += epoch_stats
            # Early stop: the policy has already moved far from π_old.
            epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        # --- log: every loss is the mean over all minibatches of this update ---
        losses = {key: torch.stack([s[key] for s in update_stats]).mean().item()
                  for key in update_stats[0]}
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
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
