"""Proximal policy optimisation (PPO-clip) from pixels: Atari games and MinAtar, in one file.

    PPO-clip on images, one iteration of `train`:
    1. Each env turns its screens into the network's input (`make_env`). An ALE game gets
       Gymnasium's form of DQN's preprocessing: 84×84 gray frames, 4 stacked. A MinAtar game
       gives its 10×10 grid. In training on ALE, a lost life ends the episode and rewards are signs.
    2. Step the N envs T times with π_θ (`--- rollout ---`). Store obs (as uint8), a, r, V(s) and
       log π_θ_old(a|s).
    3. At a truncation, store V(final obs) to bootstrap the cut episode (`final_values`).
    4. Bootstrap the batch's end with V(s_T). Compute the GAE-λ advantages Â (`compute_gae`).
    5. For K epochs, shuffle the batch into minibatches. On each, normalise Â, then take one Adam
       step on the loss (`ppo_loss`). The step size α and the clip ε decay with the iterations.
    6. Log each loss as its mean over all the update's minibatches (`--- log ---`).

    python ppo_atari.py --env-id ALE/Breakout-v5             # Breakout, 10M steps of 4 frames
    python ppo_atari.py --env-id MinAtar/Breakout-v1         # MinAtar's Breakout, 10×10 frames
    python ppo_atari.py --help                               # every flag, with its meaning
    python ppo_atari.py --eval-checkpoint runs/<run>/model.pt --capture-video  # (tooling)
    tensorboard --logdir runs

What changes from ppo_atari_1_encoder.py: Atari's details and the PPO paper's Atari defaults. They
are not one idea: ALE's preprocessing, uint8 storage, Table 5's settings, ε decayed."""

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

ALGORITHM, RELEASE = "ppo_atari", "0.5.0"  # this script, and pgref's release
SPACES = "image", "Discrete"  # the observations and actions it takes


# "core detail N", "continuous detail N": item N of Huang et al. 2022's lists of PPO's details.
@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "ALE/Breakout-v5"
    """an ALE game (ALE/<Game>-v5) or a MinAtar one (MinAtar/<Game>-v1), with Discrete actions"""
    total_timesteps: int = 9_999_360
    """agent steps to train for, summed over all envs; an ALE step is 4 frames (9,765 batches)"""
    learning_rate: float = 2.5e-4
    """Adam step size α of the shared network"""
    anneal_lr: bool = True
    """decay the step size linearly from α to α/I in the last of I iterations"""
    anneal_clip: bool = True
    """decay the clip ε linearly to ε/I, as the PPO paper does on Atari, even with --no-anneal-lr"""
    update_epochs: int = 3
    """K, passes over each batch"""
    num_minibatches: int = 4
    """minibatches per epoch; must divide the batch N·T"""
    clip_coef: float = 0.1
    """ε of the clipped surrogate objective, and of the value clip"""
    clip_vloss: bool = True
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's own code"""
    ent_coef: float = 0.01
    """c₂ ≥ 0, weight of the entropy bonus"""
    vf_coef: float = 1.0
    """c₁ ≥ 0, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop an update's epochs once an epoch's mean approx-KL exceeds it; typical 0.01 to 0.05"""
    norm_adv: bool = True
    """normalise advantages to mean 0, std 1 within each minibatch"""
    num_envs: int = 8
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 128
    """T, steps per environment in each batch; batch size = N·T"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.95
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""
    bootstrap_truncation: bool = True
    """bootstrap a time-limit truncation with V(final obs); --no-… treats it as a termination"""
    sticky_actions: float | None = None
    """in [0, 1): P(a game repeats its last action). Default: DQN's 0 on ALE, 0.1 on MinAtar"""

    # --- the run (tooling.py, where importable, adds its own flags) ---
    seed: int = 1
    """seed ≥ 0 of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found)"""


def is_ale(env_id: str) -> bool:
    """An Atari game of ALE: ALE/<Game>-v5, or the older <Game>NoFrameskip-v4."""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id


def sticky(env_id: str, sticky_actions: float | None) -> float | None:
    """--sticky-actions, or by default DQN's 0 on ALE and MinAtar's own 0.1 (else None)."""
    default = 0.0 if is_ale(env_id) else 0.1 if env_id.startswith("MinAtar/") else None
    return default if sticky_actions is None else sticky_actions


def make_env(env_id: str, train: bool = False, sticky_actions=None, **kwargs) -> gym.Env:
    """The one place where an env is made: `train`, evaluation and the checks call it. An ALE game
    is cut at 108,000 frames (≤ 27,000 steps). An env with no time limit is cut at 108,000 steps."""
    if env_id.startswith("MinAtar/") and env_id not in gym.registry:
        import minatar.gym
        minatar.gym.register_envs()
    if not is_ale(env_id):
        if sticky(env_id, sticky_actions) is not None:  # MinAtar takes it. Other envs refuse it.
            kwargs["sticky_action_prob"] = sticky(env_id, sticky_actions)
        env = gym.make(env_id, **kwargs)
        if env.spec.max_episode_steps is None:
            env = gym.wrappers.TimeLimit(env, 108_000)
        env = gym.wrappers.RecordEpisodeStatistics(env, stats_key="game")
        space = env.observation_space
        if len(space.shape) != 3:
            return env
        to_chw = functools.partial(np.moveaxis, source=2, destination=0)
        space = gym.spaces.Box(to_chw(space.low), to_chw(space.high), dtype=space.dtype)
        return gym.wrappers.TransformObservation(env, to_chw, space)
    import ale_py
    gym.register_envs(ale_py)
    env = gym.make(env_id, frameskip=1, repeat_action_probability=0.0, max_episode_steps=108_000,
                   **kwargs)
    # Sticky actions here, not in ALE: ALE's saved state lacks the action that it repeats.
    if sticky(env_id, sticky_actions):
        env = gym.wrappers.StickyAction(env, sticky(env_id, sticky_actions))
    env = SaveALEState(gym.wrappers.RecordEpisodeStatistics(env, stats_key="game"))
    # 1 to 30 no-ops at reset. A step is 4 frames, seen as the max of the last two, 84×84 grayscale.
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    if train:
        env = EpisodicLife(env)
    if "FIRE" in env.unwrapped.get_action_meanings():
        env = FireAtLifeStart(env)
    if train:
        env = gym.wrappers.TransformReward(env, np.sign)
    return gym.wrappers.FrameStackObservation(env, 4)  # (4, 84, 84) uint8: 4 frames show motion


class SaveALEState(gym.Wrapper):
    """Pickles the emulator's state and random generators with the env."""

    pickles_state = True

    def __getstate__(self):
        game = self.env.unwrapped
        return dict(self.__dict__, ale=game.clone_state(include_rng=True), rng=game.np_random)

    def __setstate__(self, state):
        ale, rng = state.pop("ale"), state.pop("rng")
        self.__dict__.update(state)
        self.env.unwrapped.restore_state(ale)
        self.env.unwrapped.np_random = rng


class EpisodicLife(gym.Wrapper):
    """A lost life ends the training episode (terminated), but not the game: `reset` plays on."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives, self.game_over = 0, True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        terminated = terminated or 0 < lives < self.lives
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, _, _, info = self.env.step(0)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireAtLifeStart(gym.Wrapper):
    """Presses FIRE (action 1) at the start of each life, in every game that has FIRE."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, _, _, info = self.env.step(1)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        last, self.lives = self.lives, self.env.unwrapped.ale.lives()
        if self.lives < last and not (terminated or truncated):
            obs, more, terminated, truncated, info = self.env.step(1)
            reward += more
        return obs, reward, terminated, truncated, info


def make_vec_env(env_id: str, num_envs: int, sticky_actions=None) -> gym.vector.VectorEnv:
    # SAME_STEP autoreset: the step that ends an episode already returns the first observation of
    # the next one. The real last observation is in infos["final_obs"].
    env_fn = functools.partial(make_env, env_id, train=True, sticky_actions=sticky_actions)
    return gym.vector.SyncVectorEnv([env_fn] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer: nn.Module, std: float = np.sqrt(2)) -> nn.Module:
    # Orthogonal weights, zero biases (core detail 2). A 0.01 policy head starts π near uniform.
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def encoder(obs_shape: tuple[int, ...]) -> tuple[nn.Sequential, str]:
    """The CNN encoder of (C, H, W) observations, C stacked frames or object kinds, and its name."""
    channels, height, width = obs_shape
    if min(height, width) >= 36:
        convs = [nn.Conv2d(channels, 32, 8, stride=4), nn.Conv2d(32, 64, 4, stride=2),
                 nn.Conv2d(64, 64, 3, stride=1)]
        features, name = 512, "the Nature CNN"
    else:
        convs, features = [nn.Conv2d(channels, 16, 3, stride=1)], 128
        name = "MinAtar's network (one 3×3 convolution)"
    layers = [module for conv in convs for module in (layer_init(conv), nn.ReLU())]
    with torch.no_grad():
        flat = nn.Sequential(*layers, nn.Flatten())(torch.zeros(1, *obs_shape)).shape[1]
    dense = layer_init(nn.Linear(flat, features))
    return nn.Sequential(*layers, nn.Flatten(), dense, nn.ReLU()), name


class Agent(nn.Module):
    """Actor π_θ(a|s) (Categorical logits) and critic V_θ(s): two linear heads on one encoder."""

    def __init__(self, obs_space: gym.spaces.Box, n_actions: int):
        super().__init__()
        self.encoder, self.name = encoder(obs_space.shape)
        features = self.encoder[-2].out_features
        self.actor = layer_init(nn.Linear(features, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(features, 1), std=1.0)
        # Pixels 0 to 255 in, 0 to 1 to the network. MinAtar's 0/1 frames stay as they are.
        self.register_buffer("scale", torch.tensor(1.0 / float(obs_space.high.max())))

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (B, C, H, W), uint8 or bool -> (B, features)."""
        pixels = (obs.float() * self.scale).contiguous(memory_format=torch.channels_last)
        return self.encoder(pixels)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    def greedy_action(self, obs, memory=None):
        """The most likely action for an observation (C, H, W), and no memory for the next call."""
        return int(self.actor(self.features(torch.as_tensor(obs)[None])).argmax()), None

    def sampled_action(self, obs, memory=None):
        return int(self.get_action_and_value(torch.as_tensor(obs)[None])[0]), None

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, C, H, W) -> action (B,), log π(a|s) (B,), entropy (B,), V(s) (B,)."""
        hidden = self.features(obs)
        logits = self.actor(hidden)
        log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
        if action is None:
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy, self.critic(hidden).squeeze(-1)


def make_agent(args: Args, observation_space, action_space) -> Agent:
    """The Agent for these spaces and flags: `train` builds it so, and tooling.py too."""
    return Agent(observation_space, int(action_space.n))


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.
    All inputs have shape (T, N), time-major. next_values[t] = V(s_{t+1}) is the value of the
    observation that really followed step t. Returns (advantages, returns), both (T, N).

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0"""
    # Every δ_t at once. Only the recursion over A needs a loop, run backwards in time.
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
    # A sample gives no gradient only where the clipped term is the smaller one. That is where
    # Â > 0 and r > 1 + ε, or Â < 0 and r < 1 − ε: the steps already moved it far enough its way.
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
    """Train with PPO, log to TensorBoard, and return the loop's `state()` at the end."""
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs, args.sticky_actions)
    obs_shape = envs.single_observation_space.shape  # (C, H, W)
    agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
    print(f"{args.env_id}: " + ("Atari preprocessing after DQN's" if is_ale(args.env_id) else
          "frames as the env gives them, channels first") + " (make_env), sticky actions "
          f"{sticky(args.env_id, args.sticky_actions)}, observations {obs_shape}, {agent.name}",
          flush=True)
    # One optimiser for the shared network. Adam's ε is 1e-5, not 1e-8 (core detail 3).
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)
    obs_np = np.zeros((*shape, *obs_shape), dtype=np.uint8)
    actions_np = np.zeros(shape, dtype=np.int64)
    logprobs_np, values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(6))

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None

    # Everything the loop needs to go on from the end of an update, by name. Add here and below
    # any state you add to the loop, such as a target network or a schedule's counter.
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
    start_time, start_step, last_print = time.time(), global_step, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / num_iterations
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * frac
        clip_coef = args.clip_coef * frac if args.anneal_clip else args.clip_coef

        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        with torch.inference_mode():  # No gradient: the update recomputes log π and V.
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)  # (N, C, H, W)
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob.cpu().numpy(), value.cpu().numpy())
                next_obs_np, reward, terminated, truncated, infos = envs.step(action_np)
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                if truncated.any():
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs = torch.as_tensor(final_obs_np, device=device)
                    final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()
                # The games that ended, with their real score over all lives (make_env).
                ended = infos.get("final_info", {})
                for i in np.flatnonzero(ended.get("_game", [])):
                    episode_return, length = ended["game"]["r"][i], ended["game"]["l"][i]
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
        # The critic regresses on the λ-returns A + V, as in PPO's reference code, not on λ = 1.
        advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,
                                          args.gamma, args.gae_lambda)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, *obs_shape), actions.reshape(-1)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages, b_logprobs = advantages.reshape(-1), logprobs.reshape(-1)

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
                                       clip_coef, args.clip_vloss, args.ent_coef, args.vf_coef)
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
        # Explained variance 1 − Var[R − V]/Var[R]. 1 is a perfect critic, ≤ 0 a useless one.
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
