"""MinAtar's games with their 10×10×C frames flattened into vectors, for the scripts that take
vectors: `python ppo_discrete.py --env-id benchmarks.flat_minatar:MinAtarFlat/Breakout-v1`.
The baseline of ppo_atari.py's convolutional encoder (benchmarks/presets.py, suite "minatar")."""

import gymnasium as gym
import minatar.gym
import numpy as np

GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]


def make_flat(game: str, **kwargs) -> gym.Env:
    """MinAtar/<game>-v1 (its minimal action set, sticky actions 0.1), observed as a vector of
    10·10·C zeros and ones."""
    if f"MinAtar/{game}-v1" not in gym.registry:
        minatar.gym.register_envs()
    env = gym.make(f"MinAtar/{game}-v1", **kwargs)
    flat = gym.spaces.Box(0, 1, (int(np.prod(env.observation_space.shape)),), env.observation_space.dtype)
    # np.ravel, not FlattenObservation, whose lambda does not pickle: a checkpoint keeps the env.
    return gym.wrappers.TransformObservation(env, np.ravel, flat)


for _game in GAMES:  # The same episode cut as ppo_atari.py's make_env: 108,000 steps.
    gym.register(f"MinAtarFlat/{_game}-v1", entry_point=make_flat, max_episode_steps=108_000,
                 kwargs={"game": _game})
