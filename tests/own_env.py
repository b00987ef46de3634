"""Environments of "your own", as a researcher would write them: defined and registered in a
module outside Gymnasium, so that `--env-id own_env:Point-v0` imports this file first. The tests
copy it beside a copied script, or put its folder on PYTHONPATH, to try that in a fresh process.

- Point-v0: a point in the plane, pushed by a Box action in [-1, 1]², rewarded by minus its
  distance to the origin; 50 steps.
- PointGrid-v0: the same point moved one cell by a Discrete(4) action.
- PointGridFrom1-v0: PointGrid with actions numbered 1 to 4, Discrete(4, start=1).
- PointEndless-v0, PointGridEndless-v0: registered without a time limit; they never end.
- PointMultiDiscrete-v0: actions in MultiDiscrete([2, 2]), a space that no script takes.
- PointOnOldLib-v0: cannot be made on this install; its constructor raises ImportError, as
  Gymnasium's Pusher-v4 does on mujoco 3 or newer.
- PointGridFaulty-v0: PointGrid whose step raises (a lost connection to a simulator, say) at its
  300th step, mid-run.
- PointFaultyReset-v0, PointGridFaultyReset-v0: Point and PointGrid whose first reset raises.
"""

import gymnasium as gym
import numpy as np

MOVES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)


class PointEnv(gym.Env):
    def __init__(self, discrete: bool = False, start: int = 0):
        self.observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
        self.action_space = (gym.spaces.Discrete(4, start=start) if discrete
                             else gym.spaces.Box(-1, 1, (2,), np.float32))
        self.discrete, self.start = discrete, start
        self.position = np.zeros(2, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-5, 5, 2).astype(np.float32)
        return self.position.copy(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        move = MOVES[int(action) - self.start] if self.discrete else np.asarray(action, np.float32)
        self.position = np.clip(self.position + 0.5 * move, -10, 10).astype(np.float32)
        return self.position.copy(), -float(np.linalg.norm(self.position)), False, False, {}


class PointFaultyEnv(PointEnv):
    """PointGrid whose 300th step raises."""

    def __init__(self):
        super().__init__(discrete=True)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps == 300:
            raise ConnectionError("the simulator stopped answering")
        return super().step(action)


class PointFaultyResetEnv(PointEnv):
    """PointEnv whose every reset raises, as a simulator that fails to start would."""

    def reset(self, *, seed=None, options=None):
        raise ValueError("reset failed at once")


class PointMultiDiscreteEnv(PointEnv):
    """PointEnv with MultiDiscrete([2, 2]) actions: a space that no script takes."""

    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.MultiDiscrete([2, 2])


gym.register("Point-v0", entry_point=PointEnv, max_episode_steps=50)
gym.register("PointGrid-v0", entry_point=PointEnv, max_episode_steps=50, kwargs={"discrete": True})
gym.register("PointGridFrom1-v0", entry_point=PointEnv, max_episode_steps=50,
             kwargs={"discrete": True, "start": 1})
gym.register("PointEndless-v0", entry_point=PointEnv)
gym.register("PointMultiDiscrete-v0", entry_point=PointMultiDiscreteEnv, max_episode_steps=50)
gym.register("PointGridEndless-v0", entry_point=PointEnv, kwargs={"discrete": True})
gym.register("PointGridFaulty-v0", entry_point=PointFaultyEnv, max_episode_steps=50)


def needs_an_older_library():
    raise ImportError("`PointOnOldLib-v0` is only supported on `somelib<3`")


gym.register("PointOnOldLib-v0", entry_point=needs_an_older_library)
gym.register("PointFaultyReset-v0", entry_point=PointFaultyResetEnv, max_episode_steps=50)
gym.register("PointGridFaultyReset-v0", entry_point=PointFaultyResetEnv, max_episode_steps=50,
             kwargs={"discrete": True})
