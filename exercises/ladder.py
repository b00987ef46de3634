"""The exercises, in order: what each one blanks in the student's copy of the scripts, with the
one-line hint its NotImplementedError gives. `make.py` cuts them out, and `grade.py` checks them.

A part names a function or method of a script. A function defined inside another one is named as
"trpo_step.acceptable". A part may also name one of the two policy heads that reinforce.py, vpg.py
and trpo.py hold in one method. The head "if" is the Gaussian head in the block
`if self.continuous:`, and "else" the categorical head that follows it. Or a part names a block of
the method's statements, by the text of their lines. It does not use their line numbers, so that
edits elsewhere in the script move nothing. One anchor names the statement whose first line holds
it. Two anchors name the statements from the first to the second. They are taken in the innermost
list of statements that holds both. Where the first anchor lies inside a `with` block and the
second after that block, the part starts at the `with`.
"""

from typing import NamedTuple

SCRIPTS = ["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_continuous", "ppo_recurrent"]  # the reading order


class Part(NamedTuple):
    script: str
    name: str  # "compute_gae" or "Agent.get_action_and_value"
    branch: str | None = None  # None for the whole body, "if" for the Gaussian head, "else" for the categorical one
    block: tuple[str, ...] | None = None  # one anchor, as `("if truncated.any():",)`, or two: (first anchor, last anchor)


class Exercise(NamedTuple):
    number: int
    title: str
    parts: list[Part]
    hint: str


LADDER = [
    Exercise(1, "rewards-to-go", [Part("reinforce", "compute_returns")],
             "loop from the last step back: G_t = r_t + γ(1 − done_t) G_{t+1}"),
    Exercise(2, "the REINFORCE loss", [Part("reinforce", "reinforce_loss")],
             "L = −(1/B) Σ_t log π(a_t|s_t) G_t, one line"),
    Exercise(3, "the categorical policy: sampling, log-probability, entropy",
             [Part("reinforce", "Agent.get_action", "else"), Part("vpg", "Agent.get_action", "else"),
              Part("trpo", "Agent.get_action", "else"), Part("ppo_discrete", "Agent.get_action_and_value")],
             "log π(·|s) = z − logsumexp(z); sample from its softmax; H = −Σ_a π log π"),
    Exercise(4, "GAE, with termination and truncation told apart",
             [Part("vpg", "compute_gae"), Part("trpo", "compute_gae"), Part("ppo_discrete", "compute_gae"),
              Part("ppo_continuous", "compute_gae")],
             "δ_t masks V(s_{t+1}) by terminated_t only; the recursion over A stops at either end"),
    Exercise(5, "the VPG losses", [Part("vpg", "vpg_loss"), Part("vpg", "value_loss"), Part("trpo", "value_loss")],
             "−mean(log π · Â) for the policy; mean((V − R̂)²) for the critic"),
    Exercise(6, "PPO's clipped surrogate, value clipping and entropy bonus",
             [Part("ppo_discrete", "surrogate"), Part("ppo_discrete", "ppo_loss"),
              Part("ppo_continuous", "surrogate"), Part("ppo_continuous", "ppo_loss")],
             "surrogate: mean(min(r Â, clip(r, 1 ± ε) Â)), an objective to maximise; ppo_loss: minus it, "
             "plus c₁ L_V, minus c₂ H; and the stats dict"),
    Exercise(7, "the diagonal Gaussian policy: sampling, log-probability, entropy",
             [Part("reinforce", "Agent.get_action", "if"), Part("vpg", "Agent.get_action", "if"),
              Part("trpo", "Agent.get_action", "if"), Part("ppo_continuous", "Agent.get_action_and_value")],
             "independent dimensions: log-probs and entropies are sums over the last axis"),
    Exercise(8, "running normalisation of observations and rewards",
             [Part("ppo_continuous", "RunningMeanStd.update"), Part("ppo_continuous", "Agent.normalize_obs"),
              Part("ppo_continuous", "RewardScaler.scale")],
             "merge each batch's mean and variance with its count; scale r by the std of γR + r"),
    Exercise(9, "TRPO's natural gradient: Fisher-vector products and conjugate gradient",
             [Part("trpo", "fisher_vector_product"), Part("trpo", "conjugate_gradient")],
             "H·v = ∇((∇KL)·v), ∇KL taken with create_graph=True, plus c·v; CG: α = rᵀr/pᵀAp, "
             "x += αp, r −= αAp, p = r + (r_newᵀr_new/rᵀr) p"),
    Exercise(10, "the bootstrap: V(final observation) at a truncation, V(s_T) at the batch's end",
             [Part(script, "train", block=block) for script in ("vpg", "trpo", "ppo_discrete", "ppo_continuous")
              for block in [("if truncated.any():",),
                            ("next_value = agent.get_value(next_obs)", "next_values = torch.where(")]],
             "where an env was truncated, store V of infos['final_obs'] in final_values_np[step]; after the "
             "rollout, next_values[t] = values[t + 1], at t = T − 1 V of next_obs_np (the observation after the "
             "last step; no gradient), final_values where truncated"),
    Exercise(11, "PPO's update: epochs of shuffled minibatches, stopped early by --target-kl",
             [Part("ppo_discrete", "train", block=("for _epoch in range(args.update_epochs):",)),
              Part("ppo_continuous", "train", block=("for _epoch in range(args.update_epochs):",))],
             "update_epochs times: a new random order of the batch, cut into num_minibatches minibatches, each "
             "one Adam step on ppo_loss (Â normalised per minibatch, gradient clipped), its stats added to "
             "update_stats; after each epoch, stop if its mean approx_kl > target_kl (the grader also takes "
             "CleanRL's test of the epoch's last minibatch)"),
    Exercise(12, "TRPO's step: its length, and the backtracking line search",
             [Part("trpo", "trpo_step", block=("full_step = ",)), Part("trpo", "trpo_step.acceptable"),
              Part("trpo", "line_search")],
             "full step = √(2δ / xᵀ(H+cI)x) · x; the line search tries θ_old + backtrack_coef^k · full step for "
             "k = 0, 1, ... and keeps the first that acceptable() takes (mean KL ≤ δ and L risen), else θ_old"),
    Exercise(13, "the recurrent agent's memory: the state carried, and reset where an episode starts",
             [Part("ppo_recurrent", "Agent.unroll")],
             "from the state given: zero the state (all 4H) where episode_starts[t] = 1, then run the actor's "
             "and the critic's LSTM on obs[t], one step per call, or one stretch per call with no episode "
             "start after its first step; return their outputs (T, B, H) and the last state"),
]
