"""What a run does when its numbers stop making sense, and the training loop's own lines.

Guard rails: an environment that returns NaN or inf, and an update that makes a loss or a weight
non-finite, stop the run with one line that says what happened and what to look at; the run's
files and logs are those of its last checkpoint, whose weights are finite.

The loop: which samples each minibatch holds, the learning-rate schedule, gradient clipping,
early stopping on the KL, the number of optimiser steps, and that evaluation changes nothing.
Each test goes through the real `train` with recording stand-ins for the optimiser or network."""

import math
import pathlib

import numpy as np
import pytest
import torch
from conftest import PPO_SCRIPTS, SCRIPTS, VECTOR_SCRIPTS, _module, evaluate_checkpoint, read_saved, short_args

import tooling

# --- guard rails ---------------------------------------------------------------------------------

# The kind of actions of the broken env each script is tried on.
BROKEN_ENV_KIND = {"ppo_discrete": "Discrete", "ppo_continuous": "Continuous", "vpg": "Discrete",
                   "reinforce": "Discrete", "trpo": "Continuous", "ppo_recurrent": "Discrete"}


def stopped_run(module, log_dir, **overrides) -> tuple[str, str]:
    """Train until the guard stops the run; return its one-line message and the run directory."""
    with pytest.raises(SystemExit) as stopped:
        tooling.main(module, short_args(module, log_dir, save_model=True, **overrides))
    message = stopped.value.code
    assert isinstance(message, str) and "\n" not in message  # one line, and a non-zero exit
    assert message.startswith(f"{module.__name__}.py: error: ")
    (run_dir,) = pathlib.Path(log_dir).iterdir()
    return message, str(run_dir)


def assert_finite_checkpoint_and_flushed_logs(run_dir: str) -> None:
    checkpoint = read_saved(pathlib.Path(run_dir) / "model.pt", weights_only=True)
    assert all(torch.isfinite(w).all() for w in checkpoint["model"].values())
    for value in checkpoint.get("normalizer", {}).values():
        assert np.isfinite(np.asarray(value)).all()
    assert any(p.name.startswith("events.out.tfevents") and p.stat().st_size > 0
               for p in pathlib.Path(run_dir).iterdir())


@pytest.mark.parametrize("broken", ["observation", "reward"])
@pytest.mark.parametrize("name", VECTOR_SCRIPTS)  # Their envs are vectors (TickEnv).
def test_a_non_finite_env_output_stops_the_run_with_one_line(name, broken, log_dir, monkeypatch):
    """A custom env whose observation (or reward) turns NaN after 300 of its steps: the run stops
    in that rollout, naming the env and what was broken, before the value reaches the storage, the
    normaliser or TensorBoard. The run's files are those of its last checkpoint (here, of the last
    update), with finite weights."""
    module = _module(name)
    logged, real_add_scalar = [], torch.utils.tensorboard.SummaryWriter.add_scalar

    def recording_add_scalar(self, tag, value, *args, **kwargs):
        logged.append(value)
        return real_add_scalar(self, tag, value, *args, **kwargs)

    monkeypatch.setattr(torch.utils.tensorboard.SummaryWriter, "add_scalar", recording_add_scalar)
    env_id = f"NaN{broken.title()}{BROKEN_ENV_KIND[name]}-v0"
    sizes = dict(num_steps=128) if name == "ppo_continuous" else {}  # an update before step 300
    message, run_dir = stopped_run(module, log_dir, env_id=env_id, total_timesteps=8192, checkpoint_every=1, **sizes)
    # All envs step together, so the run sees step 300 of their lives at step 300 × N. Where the
    # envs run on (not reinforce.py), that step ends their 6th episode of 50 steps: a broken
    # observation then arrives as the final observation, which is checked too.
    assert message.startswith(f"{name}.py: error: {env_id}: the env returned a NaN or inf {broken} in a rollout")
    assert all(math.isfinite(v) for v in logged)  # nothing non-finite reached TensorBoard
    num_envs = short_args(module, log_dir).num_envs
    checkpoint = read_saved(pathlib.Path(run_dir) / "model.pt", weights_only=True)
    assert 0 < checkpoint["global_step"] < 300 * num_envs  # the last update before the rollout
    assert_finite_checkpoint_and_flushed_logs(run_dir)


def events(run_dir: str):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir)
    accumulator.Reload()
    return accumulator


DIVERGING = {  # a setup that makes each script's update non-finite in its first update
    "ppo_continuous": dict(env_id="Pendulum-v1", learning_rate=50.0, max_grad_norm=1000.0),
    "ppo_discrete": dict(env_id="HugeRewardDiscrete-v0"),
    "vpg": dict(env_id="HugeRewardDiscrete-v0"),
    "trpo": dict(env_id="HugeRewardDiscrete-v0"),
    "reinforce": dict(env_id="HugeRewardDiscrete-v0"),
    "ppo_recurrent": dict(env_id="HugeRewardDiscrete-v0", norm_reward=False),  # scaled, they stay small
}


@pytest.mark.parametrize("name", VECTOR_SCRIPTS)
def test_a_diverging_update_stops_the_run_before_anything_non_finite_is_saved(name, log_dir):
    module = _module(name)
    message, run_dir = stopped_run(module, log_dir, checkpoint_every=1, **DIVERGING[name])
    assert "became NaN or inf in an update" in message and "learning rate" in message
    assert not list(pathlib.Path(run_dir).glob("*.pt"))  # its first update: nothing to keep


@pytest.mark.parametrize("name", VECTOR_SCRIPTS)
def test_a_diverged_update_stops_the_run_and_its_files_keep_the_update_before(name, log_dir, monkeypatch):
    """The third update turns a weight NaN: the run stops, and model.pt and checkpoint.pt hold
    the weights after the second update, with its step (not the initial weights, not NaN)."""
    module = _module(name)
    after, real_train = [], module.train

    def train(args, writer, hook):
        def poisoning_hook(state, losses=None):
            if losses is not None and len(after) == 2:
                with torch.no_grad():
                    next(state["agent"].parameters()).view(-1)[0] = float("nan")
            elif losses is not None:
                after.append((state["global_step"], {k: v.clone() for k, v in state["agent"].state_dict().items()}))
            return hook(state, losses)

        return real_train(args, writer, poisoning_hook)

    monkeypatch.setattr(module, "train", train)
    message, run_dir = stopped_run(module, log_dir, checkpoint_every=1,
                                   env_id="CartPole-v1" if name != "ppo_continuous" else "Pendulum-v1")
    checkpoint = read_saved(pathlib.Path(run_dir) / "model.pt", weights_only=True)
    step, weights = after[1]
    assert checkpoint["global_step"] == step > after[0][0]
    assert all(torch.equal(checkpoint["model"][k], w) for k, w in weights.items())
    assert any(not torch.equal(w, after[0][1][k]) for k, w in weights.items())  # update 2 moved them
    assert read_saved(pathlib.Path(run_dir) / "checkpoint.pt", weights_only=False)["state"]["global_step"] == step


def test_a_healthy_run_gets_no_warning(log_dir, capsys):
    ppo = _module("ppo_discrete")
    tooling.main(ppo, short_args(ppo, log_dir))
    assert "warning" not in capsys.readouterr().err


# --- the training loop --------------------------------------------------------------------------

class RecordingAdam(torch.optim.Adam):
    """The real Adam, which also records at every step its step size and the global L2 norm of
    the gradient it is given (after any clipping)."""

    steps: list  # (id of the optimiser, lr, gradient norm) per step, shared by all instances

    def step(self, closure=None):
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        RecordingAdam.steps.append((id(self), self.param_groups[0]["lr"], norm))
        return super().step(closure)


@pytest.fixture
def adam_steps(monkeypatch):
    RecordingAdam.steps = []
    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    return RecordingAdam.steps


PPO_SHORT = dict(num_envs=2, num_steps=64, num_minibatches=4, update_epochs=3, total_timesteps=512)  # 4 updates


@pytest.mark.parametrize("name", PPO_SCRIPTS)
def test_each_epoch_visits_every_sample_once_in_reshuffled_minibatches(name, log_dir, monkeypatch):
    """Each update is K epochs; each epoch splits the whole batch, in a new random order, into
    minibatches of batch/num_minibatches samples, and visits each sample exactly once."""
    module = _module(name)
    calls = []  # (kind, observations) of every call of the policy, in order

    class RecordingAgent(module.Agent):
        def get_action_and_value(self, obs, action=None):
            calls.append(("update" if action is not None else "act", obs.detach().clone()))
            return super().get_action_and_value(obs, action)

    monkeypatch.setattr(module, "Agent", RecordingAgent)
    # ppo_atari.py stores frames as uint8: an env whose frames are uint8 too compares equal.
    image = {"env_id": "TickImage-v0"} if name == "ppo_atari" else {}
    args = short_args(module, log_dir, **PPO_SHORT, **image)
    tooling.main(module, args)
    minibatch = args.num_envs * args.num_steps // args.num_minibatches
    acts = [obs for kind, obs in calls if kind == "act"]
    updates = [obs for kind, obs in calls if kind == "update"]
    per_update = args.update_epochs * args.num_minibatches
    assert len(acts) == 4 * args.num_steps and len(updates) == 4 * per_update
    for u in range(4):
        collected = torch.cat(acts[u * args.num_steps:(u + 1) * args.num_steps]).flatten(1)  # (T·N, obs_dim)
        orders = []
        for epoch in range(args.update_epochs):
            mbs = updates[u * per_update + epoch * args.num_minibatches:u * per_update + (epoch + 1) * args.num_minibatches]
            assert all(len(mb) == minibatch for mb in mbs)
            visited = torch.cat(mbs).flatten(1)
            assert torch.equal(sort_rows(visited), sort_rows(collected))  # every sample, once
            orders.append(visited)
        assert not torch.equal(orders[0], orders[1])  # a new order each epoch
    assert len(calls) == len(acts) + len(updates)


def sort_rows(x: torch.Tensor) -> torch.Tensor:
    return x[np.lexsort(x.T.numpy()[::-1])]


@pytest.mark.parametrize("anneal", [True, False])
@pytest.mark.parametrize("name", PPO_SCRIPTS)
def test_learning_rate_schedule_first_and_last_update(name, anneal, log_dir, adam_steps):
    module = _module(name)
    args = short_args(module, log_dir, anneal_lr=anneal, learning_rate=1e-3, **PPO_SHORT)
    tooling.main(module, args)
    per_update, iterations = args.update_epochs * args.num_minibatches, 4
    assert len(adam_steps) == iterations * per_update
    lrs = [lr for _, lr, _ in adam_steps]
    assert lrs[:per_update] == [1e-3] * per_update  # α in the first update
    expected_last = 1e-3 / iterations if anneal else 1e-3  # α (1 − (K − 1)/K) = α/K in the last
    assert lrs[-per_update:] == pytest.approx([expected_last] * per_update, rel=1e-12)


@pytest.mark.parametrize("name", PPO_SCRIPTS)
def test_gradients_are_clipped_to_max_grad_norm(name, log_dir, adam_steps):
    module = _module(name)
    tooling.main(module, short_args(module, log_dir, max_grad_norm=1e-3, **PPO_SHORT))
    norms = [norm for _, _, norm in adam_steps]
    assert all(norm <= 1e-3 * (1 + 1e-4) for norm in norms)
    assert max(norms) > 0.9e-3  # the clip is active: without it, the norms are far larger


@pytest.mark.parametrize("name", PPO_SCRIPTS)
def test_target_kl_stops_an_update_after_its_first_epoch(name, log_dir, adam_steps):
    module = _module(name)
    args = short_args(module, log_dir, **PPO_SHORT)
    tooling.main(module, args)
    assert len(adam_steps) == 4 * args.update_epochs * args.num_minibatches  # no target: all epochs
    adam_steps.clear()
    tooling.main(module, short_args(module, log_dir, target_kl=1e-12, **PPO_SHORT))
    assert len(adam_steps) == 4 * args.num_minibatches  # any KL > 1e-12: one epoch per update


def test_vpg_takes_one_policy_step_and_vf_iters_critic_steps_per_batch(log_dir, adam_steps):
    vpg = _module("vpg")
    args = short_args(vpg, log_dir, vf_iters=7)  # 4 batches of 4 × 256 steps
    tooling.main(vpg, args)
    optimisers = list(dict.fromkeys(opt for opt, _, _ in adam_steps))  # in order of first step
    pi, vf = optimisers
    sequence = [opt for opt, _, _ in adam_steps]
    assert sequence == ([pi] + [vf] * 7) * 4


def test_reinforce_takes_one_step_per_batch(log_dir, adam_steps):
    reinforce = _module("reinforce")
    result = tooling.main(reinforce, short_args(reinforce, log_dir))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(result["run_dir"])
    events.Reload()
    assert len(adam_steps) == len(events.Scalars("losses/policy_loss")) >= 3


def policy_state(agent) -> list[np.ndarray]:
    """Everything evaluation could change: the weights and, in the state_dict of an agent that
    normalises observations, their statistics (and their count)."""
    state = [w.detach().numpy().copy() for w in agent.state_dict().values()]
    return state + [np.array(agent.obs_rms.count)] if hasattr(agent, "obs_rms") else state


@pytest.mark.parametrize("name", SCRIPTS)
def test_evaluation_changes_neither_weights_nor_normalisation(name, log_dir, monkeypatch):
    """Evaluating after training leaves the policy and the observation statistics it sees as they
    were; evaluating a checkpoint twice gives the same returns."""
    module = _module(name)
    result = tooling.main(module, short_args(module, log_dir, save_model=True))
    before = policy_state(result["agent"])
    tooling.evaluate(module, result["agent"], short_args(module, log_dir, eval_episodes=2), log_dir)
    assert all(np.array_equal(a, b) for a, b in zip(before, policy_state(result["agent"]), strict=True))
    path = pathlib.Path(result["run_dir"]) / "model.pt"
    assert evaluate_checkpoint(module, path, "--eval-episodes", "2") == evaluate_checkpoint(module, path, "--eval-episodes", "2")
