"""The derivations page, docs/derivations.html: from the policy-gradient theorem to the clipped
surrogate, each equation that a script computes beside the lines that compute it, and every
`# math:` line of the scripts linked back to its place here.

    python docs/build.py      # writes docs/derivations.html with the other pages

Nothing here names a line number. A line of code is named by the definition that holds it and a
piece of its text (`Code("vpg", "compute_gae", "next_advantage = deltas[t]")`), found when the
page is built; a `# math:` line by its LaTeX (`MATH_LINKS`). The build stops with a message when
one of them no longer resolves: a piece of text found in no line or in two, a `# math:` line
whose LaTeX is in no entry, an entry that no script holds any more, or a `# math:` line whose
section of its script's page shares no line with the code links of the place it points to.

Text in SECTIONS is written with `$...$` for a formula inside a sentence, `{eq:id}` for a link to
an equation (shown as its number) and `{sec:id}` for a link to a section; the rest is prose as
the script pages show it (`backticks` as code).
"""

import ast
import functools
import html
import re
import sys
from dataclasses import dataclass, field

PAGE = "derivations.html"


@dataclass(frozen=True)
class Code:
    """A line of a script: in the definition `where` ("compute_gae", "Agent.get_action"), the one
    line of code (not a comment, not the docstring) that contains `text`; `text` None: the `def`."""
    script: str
    where: str
    text: str | None = None


def each(scripts: list[str], where: str, *texts: str) -> list[Code]:
    return [Code(s, where, t) for s in scripts for t in texts]


@dataclass
class Eq:
    """A displayed equation (LaTeX), with the id it is linked by and the lines that compute it."""
    id: str
    latex: str
    code: list[Code] = field(default_factory=list)


@dataclass
class Section:
    id: str
    title: str
    blocks: list  # str (a paragraph) or Eq


ALL = ["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_continuous", "ppo_atari", "ppo_recurrent"]
CRITIC = ["vpg", "trpo", "ppo_discrete", "ppo_continuous", "ppo_atari", "ppo_recurrent"]  # (ppo_recurrent last)
PPO = ["ppo_discrete", "ppo_continuous", "ppo_atari", "ppo_recurrent"]
ACTION = {"reinforce": "Agent.get_action", "vpg": "Agent.get_action", "trpo": "Agent.get_action",
          "ppo_discrete": "Agent.get_action_and_value", "ppo_continuous": "Agent.get_action_and_value",
          "ppo_recurrent": "Agent.get_action_and_value", "ppo_atari": "Agent.get_action_and_value"}


def heads(scripts: list[str], *texts: str) -> list[Code]:
    """A line of each script's policy head (`get_action` or `get_action_and_value`)."""
    return [Code(s, ACTION[s], t) for s in scripts for t in texts]


SECTIONS = [
    Section("pg-theorem", "The policy gradient of an episode", [
        "A stochastic policy $\\pi_\\theta(a|s)$ plays episodes $\\tau = (s_0, a_0, r_0, s_1, a_1, r_1, \\dots, s_T)$. "
        "We want the weights θ that maximise the expected return. The return depends on θ only through the "
        "sampled episode. The environment that produced it cannot be differentiated. So the gradient has to "
        "move onto something we can differentiate: the log-probability of the actions.",
        Eq("eq-objective", r"J(\theta) = \mathbb{E}_{\tau\sim p_\theta}\big[R(\tau)\big] = \int p_\theta(\tau)\, R(\tau)\, d\tau,"
                           r" \qquad R(\tau) = \sum_{t=0}^{T-1} r_t"),
        "The log-derivative trick: wherever $p_\\theta(\\tau) > 0$, the derivative of a logarithm is the "
        "derivative of its argument divided by it.",
        Eq("eq-log-derivative", r"\nabla_\theta\, p_\theta(\tau) = p_\theta(\tau)\, \nabla_\theta \log p_\theta(\tau)"),
        "Take the gradient inside the integral. $R(\\tau)$ depends on θ only through which τ is drawn. Then "
        "{eq:eq-log-derivative} turns the gradient of an expectation into an expectation, which samples "
        "can estimate:",
        Eq("eq-pg-trajectory", r"\nabla_\theta J = \int \nabla_\theta\, p_\theta(\tau)\, R(\tau)\, d\tau"
                               r" = \mathbb{E}_{\tau\sim p_\theta}\big[\nabla_\theta \log p_\theta(\tau)\, R(\tau)\big]"),
        "The probability of an episode is a product of three kinds of factor. They are the start-state "
        "distribution, the policy's choices and the environment's transitions. Its logarithm is a sum, and only "
        "the policy's terms depend on θ. The dynamics, which we neither know nor can differentiate, drop out.",
        Eq("eq-log-trajectory", r"\begin{array}{rl} \log p_\theta(\tau) &= \log\rho_0(s_0) + \sum_{t=0}^{T-1}"
                                r" \left(\log\pi_\theta(a_t|s_t) + \log P(s_{t+1}, r_t \mid s_t, a_t)\right) \\"
                                r" \nabla_\theta \log p_\theta(\tau) &= \sum_{t=0}^{T-1} \nabla_\theta \log\pi_\theta(a_t|s_t)"
                                r" \end{array}"),
        "Putting {eq:eq-log-trajectory} into {eq:eq-pg-trajectory} gives the policy gradient in its trajectory "
        "form, also called the score-function form. It raises the log-probability of every action of an episode "
        "in proportion to the episode's return. Williams's (1992, §5) episodic REINFORCE algorithms follow this "
        "gradient in expectation. Sutton et al. (2000) write the same gradient per state and action. "
        "{sec:baseline} derives that form, the policy-gradient theorem, from this one.",
        Eq("eq-pg", r"\nabla_\theta J = \mathbb{E}_{\tau\sim p_\theta}\big[\sum_{t=0}^{T-1}"
                    r" \nabla_\theta \log\pi_\theta(a_t|s_t)\, R(\tau)\big]"),
        "Averaging the bracket over a batch of sampled episodes estimates the gradient without bias. Autograd "
        "cannot differentiate through the sampling. So each script builds a scalar whose gradient is the "
        "estimate, up to sign and scale. reinforce.py minimises minus the mean of "
        "$\\log\\pi_\\theta(a_t|s_t)$ over the batch's steps, each weighted by its return. The return is held "
        "constant. vpg.py weights by an advantage instead ({sec:baseline}). trpo.py and the PPO scripts "
        "differentiate the surrogates of {sec:surrogate} and {sec:clip}. At $\\theta_{old}$ their gradient "
        "is the same estimate, weighted by advantages. The value of reinforce.py's and vpg.py's loss measures "
        "nothing. Only its gradient is used. The log-probabilities themselves are in {sec:pieces}.",
    ]),
    Section("reward-to-go", "Reward-to-go: past rewards drop out", [
        "In {eq:eq-pg} the log-probability of $a_t$ is weighted by the whole return. That includes the rewards "
        "received before $a_t$ was chosen, which cannot depend on $a_t$. They add nothing in expectation, only "
        "noise. The reason: the gradient of a log-probability has mean zero under its own distribution, "
        "because the probabilities sum to one whatever θ is.",
        Eq("eq-score-zero", r"\mathbb{E}_{a\sim\pi_\theta(\cdot|s)}\big[\nabla_\theta\log\pi_\theta(a|s)\big]"
                            r" = \sum_a \pi_\theta(a|s)\, \frac{\nabla_\theta\pi_\theta(a|s)}{\pi_\theta(a|s)}"
                            r" = \nabla_\theta \sum_a \pi_\theta(a|s) = \nabla_\theta 1 = 0"),
        "(For continuous actions the sums are integrals.) Take a reward $r_{t'}$ with $t' < t$. Given "
        "everything up to $s_t$, that reward is fixed. $a_t$ is drawn afresh from $\\pi_\\theta(\\cdot|s_t)$. "
        "So the inner expectation is {eq:eq-score-zero}:",
        Eq("eq-past-rewards", r"\mathbb{E}\big[r_{t'}\, \nabla_\theta\log\pi_\theta(a_t|s_t)\big]"
                              r" = \mathbb{E}\big[r_{t'}\; \mathbb{E}_{a_t\sim\pi_\theta(\cdot|s_t)}"
                              r"\big[\nabla_\theta\log\pi_\theta(a_t|s_t)\big]\big] = 0 \qquad (t' < t)"),
        "Dropping those terms credits each action with the rewards that followed it, its reward-to-go $G_t$. "
        "The expectation is unchanged. The variance is usually lower, because the dropped terms have mean zero "
        "but add noise of their own. It is not always lower, since they can be correlated with the terms that "
        "stay.",
        Eq("eq-reward-to-go", r"\nabla_\theta J = \mathbb{E}\big[\sum_{t=0}^{T-1}"
                              r" \nabla_\theta\log\pi_\theta(a_t|s_t)\, G_t\big],"
                              r" \qquad G_t = \sum_{t'=t}^{T-1} r_{t'}"),
        "The scripts also discount: a reward $l$ steps after the action counts $\\gamma^l$. Within an episode "
        "the discounted reward-to-go obeys a one-step recursion, run backwards over the rollout. It restarts at "
        "the last step of an episode ($\\text{done}_t = 1$), so that no sum crosses into the next episode.",
        Eq("eq-discounted-rtg", r"G_t = \sum_{l\geq 0} \gamma^l r_{t+l} = r_t + \gamma\,(1 - \text{done}_t)\, G_{t+1}",
           [Code("reinforce", "compute_returns", "next_return = rewards[t] + gamma * (1.0 - dones[t]) * next_return")]),
        "With γ < 1 the expectation is no longer $\\nabla_\\theta J$. It is the discounted policy gradient "
        "$g^\\gamma$ of Schulman et al. (2016, eq. 6). The bias is accepted because distant rewards add much "
        "variance, and an action has little influence on them. The gradient of the discounted return from the "
        "first state would also weight step t by $\\gamma^t$ (Sutton & Barto 2018, §13.3). The scripts do not: "
        "a late step counts as much as an early one. reinforce.py has no critic to estimate what a time limit "
        "cut off. So it plays each episode to its end and counts a time-limit cut as an end. Its returns are "
        "those collected within the limit.",
        "Over a batch D of episodes, the estimate and the loss that reinforce.py differentiates:",
        Eq("eq-reinforce-estimate", r"\hat g = \frac{1}{|D|} \sum_{\tau\in D} \sum_t \nabla_\theta\log\pi_\theta(a_t|s_t)\, G_t",
           [Code("reinforce", "reinforce_loss", "return -(logprob * returns).mean()")]),
        Eq("eq-reinforce-loss", r"L(\theta) = -\frac{1}{B}\sum_t \log\pi_\theta(a_t|s_t)\, G_t, \qquad"
                                r" -\nabla_\theta L = \frac{|D|}{B}\, \hat g",
           [Code("reinforce", "reinforce_loss", "return -(logprob * returns).mean()")]),
        "The loss is a mean over the B steps of the batch, not over its |D| episodes. That multiplies the "
        "estimate by |D|/B, one over the mean episode length. The direction is kept, but the scale drifts as "
        "episodes grow longer.",
    ]),
    Section("baseline", "The baseline, the value function and the policy-gradient theorem", [
        "The same argument removes more. Take a baseline $b(s_t)$: anything computed from the state, or from "
        "what happened before $a_t$ was drawn, but not from $a_t$ or what follows. It comes out of the inner "
        "expectation, and {eq:eq-score-zero} makes the product vanish:",
        Eq("eq-baseline-zero", r"\mathbb{E}\big[\nabla_\theta\log\pi_\theta(a_t|s_t)\, b(s_t)\big]"
                               r" = \mathbb{E}_{s_t}\left[b(s_t)\; \mathbb{E}_{a_t\sim\pi_\theta(\cdot|s_t)}"
                               r"\big[\nabla_\theta\log\pi_\theta(a_t|s_t)\big]\right] = 0"),
        "So any state-dependent baseline can be subtracted from the reward-to-go without changing the "
        "expected gradient. This is the reinforcement baseline of Williams (1992, §4), and of Sutton et al. "
        "(2000, §3). It changes the variance, and that is its purpose.",
        Eq("eq-pg-baseline", r"\nabla_\theta J = \mathbb{E}\big[\sum_t \nabla_\theta\log\pi_\theta(a_t|s_t)\,"
                             r" \big(G_t - b(s_t)\big)\big]"),
        "A natural choice is the value of the state: the return the policy gets from $s_t$ on average. Sutton "
        "et al. (2000, §3) suggest it. Then $G_t - b(s_t)$ is positive exactly when what followed the action "
        "was better than the policy's average from that state. Given the state and the action, the expected "
        "reward-to-go is the action value $Q^\\pi$. Subtracting the value leaves the advantage:",
        Eq("eq-advantage", r"\begin{array}{c} V^\pi(s_t) = \mathbb{E}\big[G_t \mid s_t\big],"
                           r" \qquad Q^\pi(s_t, a_t) = \mathbb{E}\big[G_t \mid s_t, a_t\big], \\"
                           r" A^\pi(s_t, a_t) = Q^\pi(s_t, a_t) - V^\pi(s_t) \end{array}"),
        "The policy-gradient theorem follows from {eq:eq-reward-to-go}, in three steps:",
        "- The weight $\\nabla_\\theta\\log\\pi_\\theta(a_t|s_t)$ depends on $s_t$ and $a_t$ alone. So, "
        "inside the expectation, $G_t$ may be replaced by its expectation given them. This step assumes "
        "nothing.\n"
        "- Take the state to be Markov: what follows $s_t$ and $a_t$ depends on them alone, not on t or on "
        "the path that led there. Then the expectation of $G_t$ given them is the same function "
        "$Q^\\pi(s_t, a_t)$ at every step. This is where the assumption enters.\n"
        "- Given $s_t$, the expectation over $a_t$ is a sum weighted by $\\pi_\\theta$. Each term "
        "$\\pi_\\theta\\nabla_\\theta\\log\\pi_\\theta$ is $\\nabla_\\theta\\pi_\\theta$. Since "
        "$Q^\\pi$ does not depend on t, the sum over the steps gathers each state's terms into one. The "
        "state then counts as often as an episode visits it on average, "
        "$d^\\pi(s) = \\sum_t \\Pr(s_t = s)$. Here $\\Pr(s_t = s)$ is the probability that the episode is "
        "still running at step t and is in s.",
        Eq("eq-pg-theorem", r"\begin{array}{rl} \nabla_\theta J &= \sum_t \mathbb{E}\big[\nabla_\theta\log\pi_\theta(a_t|s_t)\,"
                            r" Q^\pi(s_t, a_t)\big] \\"
                            r" &= \sum_t \sum_s \Pr(s_t = s) \sum_a \pi_\theta(a|s)\, \nabla_\theta\log\pi_\theta(a|s)\,"
                            r" Q^\pi(s, a) \\"
                            r" &= \sum_s d^\pi(s) \sum_a \nabla_\theta\pi_\theta(a|s)\, Q^\pi(s, a) \end{array}"),
        "This is the policy-gradient theorem of Sutton et al. (2000, Theorem 1, eq. 2), with γ = 1, which "
        "they allow in episodic tasks. Its point: the gradient holds no derivative of $d^\\pi$. Changing θ "
        "changes which states are visited, yet the gradient needs no model of how. Sutton et al. prove it "
        "by unrolling the Bellman equation of $V^\\pi$. The route here goes through the probability of an "
        "episode instead. For γ < 1 their $d^\\pi$ weights a visit at step t by $\\gamma^t$. The scripts "
        "discount the rewards but weigh every step alike. So they follow the $g^\\gamma$ of "
        "{sec:reward-to-go}, not the theorem's discounted gradient.",
        "A time limit that the agent cannot see breaks the Markov assumption a little. Near the limit, the "
        "same state has less future left. The trajectory forms {eq:eq-pg} and {eq:eq-reward-to-go} do not "
        "need the assumption. Their derivation used only that the environment's factors in "
        "{eq:eq-log-trajectory} do not depend on θ. Those factors could depend on t or on the whole past, "
        "and they would still drop out. Subtracting $V^\\pi(s_t)$, a baseline, from $Q^\\pi$ "
        "leaves the advantage:",
        Eq("eq-pg-advantage", r"\nabla_\theta J = \mathbb{E}\big[\sum_t"
                              r" \nabla_\theta\log\pi_\theta(a_t|s_t)\, A^\pi(s_t, a_t)\big]"),
        "$V^\\pi$, and so $A^\\pi$, is not known. The scripts with a critic learn an estimate $V_\\phi$. They "
        "put an estimate $\\hat A_t$ in the place of $A^\\pi$ ({sec:gae}). With the batch average "
        "$\\hat{\\mathbb{E}}_t$ this is the estimator and the objective of Schulman et al. (2017, eqs. 1 and 2). "
        "vpg.py descends the objective's negative. {step:vpg_1_baseline} brings the learned baseline into the "
        "code.",
        Eq("eq-vpg-loss", r"L^{PG}(\theta) = -\frac{1}{B}\sum_t \log\pi_\theta(a_t|s_t)\, \hat A_t, \qquad"
                          r" -\nabla_\theta L^{PG} = \frac{1}{B}\sum_t \nabla_\theta\log\pi_\theta(a_t|s_t)\, \hat A_t",
           [Code("vpg", "vpg_loss", "return -(logprob * advantages).mean()")]),
        "The critic $V_\\phi$ learns the value by regression on targets $\\hat R_t$, which {sec:gae} gives "
        "too. vpg.py and trpo.py take several Adam steps on it per batch, after the policy's step.",
        Eq("eq-critic-loss", r"L^{V}(\phi) = \frac{1}{B}\sum_t \big(V_\phi(s_t) - \hat R_t\big)^2",
           each(["vpg", "trpo"], "value_loss", "return ((value - returns) ** 2).mean()")),
        "vpg.py and trpo.py standardise the advantages over the batch. The PPO scripts standardise them over "
        "each minibatch, unless `--no-norm-adv`. reinforce.py standardises its returns with `--norm-returns`. "
        "Subtracting the mean is a baseline, a constant one, though computed from the same samples. Dividing "
        "by the standard deviation rescales the gradient and keeps its direction. Its effect depends on the "
        "optimiser:",
        "- trpo.py's step has a length that δ sets, so it is the same either way, up to rounding and "
        "conjugate gradient's stop at a near-zero residual.\n"
        "- Under Adam the division keeps the gradient's scale from drifting from batch to batch.\n"
        "- In the PPO scripts it also changes the policy term's weight against the entropy bonus, and what "
        "the gradient-norm clip sees.\n"
        "In PPO's clipped objective ({sec:clip}) the shift does more: it changes which samples are clipped.",
        Eq("eq-normalise-advantages",
           r"\hat A_t \leftarrow \frac{\hat A_t - \operatorname{mean}(\hat A)}{\operatorname{std}(\hat A) + 10^{-8}}",
           [Code("reinforce", "train", "b_returns = (b_returns - b_returns.mean()) / (b_returns.std() + 1e-8)")]
           + each(["vpg", "trpo"], "train", "b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)")
           + each(PPO, "train", "mb_advantages = ((mb_advantages - mb_advantages.mean())")),
    ]),
    Section("gae", "Generalised advantage estimation", [
        "With a critic V, the critic's prediction can replace the reward-to-go, in part or in whole. Each step "
        "replaced usually lowers the variance, and adds bias wherever V is wrong. Generalised advantage "
        "estimation (Schulman et al. 2016) mixes all the choices with one parameter, λ. Its unit is the TD "
        "residual: one real reward, then the critic's guess. Suppose V were the true value $V^{\\pi,\\gamma}$. "
        "Then the residual's expectation given $s_t$ and $a_t$ would be the advantage, "
        "$Q^{\\pi,\\gamma}(s_t,a_t) - V^{\\pi,\\gamma}(s_t)$.",
        Eq("eq-td-residual", r"\delta_t = r_t + \gamma V(s_{t+1}) - V(s_t)",
           each(CRITIC, "compute_gae", "deltas = rewards + gamma * (1.0 - terminations) * next_values - values")),
        "Summing k residuals, the values in between cancel in pairs. k real rewards remain, then the critic's "
        "guess for the rest. Small k leans on the critic: low variance, but biased where V is wrong. As k "
        "grows, the estimate tends to the discounted reward-to-go minus the baseline of {sec:baseline}.",
        Eq("eq-k-step", r"\hat A_t^{(k)} = \sum_{l=0}^{k-1} \gamma^l \delta_{t+l}"
                        r" = -V(s_t) + \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})"),
        "GAE averages them all with weights $(1-\\lambda)\\lambda^{k-1}$, which sum to one for λ < 1. λ = 1 is "
        "the limit, given by the sum below. The residual $\\delta_{t+l}$ appears in every $\\hat A_t^{(k)}$ with "
        "k > l, each time with the factor $\\gamma^l$. So its total weight is "
        "$\\gamma^l (1-\\lambda)\\sum_{k>l}\\lambda^{k-1} = (\\gamma\\lambda)^l$ (Schulman et al. 2016, eq. 16):",
        Eq("eq-gae", r"\hat A_t = (1-\lambda)\big(\hat A_t^{(1)} + \lambda \hat A_t^{(2)} + \lambda^2 \hat A_t^{(3)} + \dots\big)"
                     r" = \sum_{l\geq 0} (\gamma\lambda)^l \delta_{t+l}"),
        "A geometric sum obeys a one-step recursion, so one backward pass over the rollout computes every "
        "$\\hat A_t$:",
        Eq("eq-gae-recursion", r"\hat A_t = \delta_t + \gamma\lambda\, \hat A_{t+1}",
           each(CRITIC, "compute_gae", "next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage")),
        "The two ends. λ = 0 keeps the first residual alone: low variance, biased unless V is exact. λ = 1 "
        "lets the intermediate values cancel. What remains is the discounted reward-to-go minus the baseline. "
        "It is unbiased for $g^\\gamma$, whatever V is, when the sum runs to the episode's termination "
        "(Schulman et al. 2016, eq. 18). Where the data stops first, the bootstrap $\\gamma^k V(s_{t+k})$ brings "
        "V's error back. It is as noisy as the discounted form of {eq:eq-pg-baseline} with b = V. The course "
        "brings GAE into the code in the step to {step:vpg_3_gae}.",
        Eq("eq-gae-ends", r"\lambda = 0:\ \hat A_t = \delta_t, \qquad"
                          r" \lambda = 1:\ \hat A_t = \sum_{l\geq 0}\gamma^l r_{t+l} - V(s_t)"),
        "Adding the value back gives a target for the critic, $\\hat R_t = \\hat A_t + V(s_t)$. vpg.py and "
        "trpo.py regress on the targets of λ = 1, the discounted rewards-to-go. Each is bootstrapped with the "
        "critic where the data stops, k steps on, at the end of the episode or of the batch. The bootstrap is "
        "0 after a termination. The PPO scripts regress on the λ-returns $\\hat A_t + V(s_t)$ of their own λ, as "
        "PPO's reference code does.",
        Eq("eq-gae-returns", r"\hat R_t = \hat A_t + V(s_t) \ \overset{\lambda=1}{=}\ "
                             r"\sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})",
           each(CRITIC, "compute_gae", "return advantages, advantages + values")
           + each(["vpg", "trpo"], "train", "_, returns = compute_gae(rewards, values, next_values, terminations, truncations,")
           + each(PPO, "train", "advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,")),
        "Episodes end inside a rollout of T steps, and the sums must stop there. A residual of the next "
        "episode says nothing about this action. How the last residual of an episode is formed depends on why "
        "the episode ended. Gymnasium gives two flags:",
        "- Terminated: the episode reached a state with no future, whose value is 0. So "
        "$\\delta_t = r_t - V(s_t)$.\n"
        "- Truncated: a time limit cut it, which the agent cannot see coming, since the time left is not in its "
        "observation. The critic estimates its future at the real last observation (Pardo et al. 2018). The "
        "vector env returns the next episode's first observation in its place, which must not be used.\n"
        "A rollout that ends mid-episode is cut the same way. $\\delta_{T-1}$ bootstraps with $V(s_T)$ and the "
        "sum stops, $\\hat A_T = 0$. This is the truncated GAE of Schulman et al. (2017, eqs. 11 and 12). With "
        "done = terminated or truncated:",
        Eq("eq-gae-episode-ends", r"\begin{array}{rl} \delta_t &= r_t + \gamma\,(1 - \text{terminated}_t)\, V(s_{t+1})"
                                  r" - V(s_t) \\ \hat A_t &= \delta_t + \gamma\lambda\,(1 - \text{done}_t)\, \hat A_{t+1},"
                                  r" \qquad \hat A_T = 0 \end{array}",
           each(CRITIC, "compute_gae", "deltas = rewards + gamma * (1.0 - terminations) * next_values - values",
                "not_dones = 1.0 - torch.maximum(terminations, truncations)")
           + each(CRITIC[:-1], "train", "next_values = torch.cat([values[1:], next_value[None]])")
           + [Code("ppo_recurrent", "train", "next_values = torch.cat([values[1:], next_value])")]
           + each(CRITIC, "train", "next_values = torch.where(truncations.bool(), final_values, next_values)")),
        "Here $V(s_{t+1})$ is the next stored value, and $V(s_T)$ at the rollout's end. Where step t was "
        "truncated it is V of the final observation. The PPO scripts' `--no-bootstrap-truncation`, an "
        "ablation, counts a truncation as a termination, as CleanRL does. The course brings the cut batch, "
        "bootstrapped at its end, in the step to {step:vpg_2_rollout}. It brings the bootstrap of truncations "
        "in the step to {step:vpg_2b_truncation}.",
    ]),
    Section("surrogate", "The importance-sampled surrogate", [
        "vpg.py takes one gradient step per batch and then discards the batch. After the step the data no "
        "longer comes from the current policy. To choose the size of a step, or to take several, we need an "
        "objective that can be evaluated at any θ with data collected by $\\pi_{\\theta_{old}}$. Importance "
        "sampling reweights each sample by how much more likely the new policy makes it. It needs "
        "$\\pi_{\\theta_{old}}(a|s) > 0$ wherever $\\pi_\\theta(a|s) > 0$. That holds for the softmax and "
        "Gaussian policies here, which give every action a positive probability or density.",
        Eq("eq-importance", r"\mathbb{E}_{a\sim\pi_\theta(\cdot|s)}\big[f(a)\big]"
                            r" = \mathbb{E}_{a\sim\pi_{\theta_{old}}(\cdot|s)}"
                            r"\left[\frac{\pi_\theta(a|s)}{\pi_{\theta_{old}}(a|s)}\, f(a)\right]"),
        "Apply it to $\\sum_a \\pi_\\theta(a|s)\\, A^{\\pi_{\\theta_{old}}}(s,a)$. That is the advantage that the "
        "new policy's actions have by the old policy's measure. Hold that advantage fixed, and leave the states "
        "as $\\pi_{\\theta_{old}}$ visited them. The result is the surrogate objective, the local approximation "
        "of Kakade & Langford (2002) and Schulman et al. (2015, eq. 3). It is TRPO's objective (Schulman et al. "
        "2015, eq. 14). TRPO weights by Q where we weight by A. In expectation the two differ by a term that "
        "does not depend on θ. It is also PPO's $L^{CPI}$ (Schulman et al. 2017, eq. 6). The scripts form the "
        "ratio from log-probabilities, as the exponential of their difference.",
        Eq("eq-ratio", r"r_t(\theta) = \frac{\pi_\theta(a_t|s_t)}{\pi_{\theta_{old}}(a_t|s_t)}"
                       r" = \exp\big(\log\pi_\theta(a_t|s_t) - \log\pi_{\theta_{old}}(a_t|s_t)\big)",
           each(PPO, "ppo_loss", "logratio = new_logprob - old_logprob", "ratio = logratio.exp()")
           + [Code("trpo", "surrogate", "return ((logprob - old_logprob).exp() * advantages).mean()")]),
        Eq("eq-surrogate", r"L(\theta) = \hat{\mathbb{E}}_t\big[r_t(\theta)\, \hat"
                           r" A_t\big] = \frac{1}{B}\sum_t r_t(\theta)\, \hat A_t",
           [Code("trpo", "surrogate", "return ((logprob - old_logprob).exp() * advantages).mean()")]),
        "At $\\theta = \\theta_{old}$ the ratio is 1, and its gradient is the gradient of the log-probability. "
        "So the surrogate's gradient there is the policy gradient of {eq:eq-vpg-loss}. L agrees with the true "
        "objective to first order (Schulman et al. 2015, eq. 4, after Kakade & Langford 2002).",
        Eq("eq-surrogate-gradient", r"\begin{array}{rl} \text{at } \theta = \theta_{old}: \quad \nabla_\theta r_t(\theta)"
                                    r" &= \frac{\nabla_\theta\pi_\theta(a_t|s_t)}{\pi_{\theta_{old}}(a_t|s_t)}"
                                    r" = \nabla_\theta\log\pi_\theta(a_t|s_t), \\"
                                    r" \nabla_\theta L(\theta_{old}) &="
                                    r" \hat{\mathbb{E}}_t\big[\nabla_\theta\log\pi_\theta(a_t|s_t)\, \hat A_t\big] = g"
                                    r" \end{array}",
           [Code("trpo", "trpo_step", "g = flat_grad(objective, params)")]),
        "Away from $\\theta_{old}$, L ignores that π_θ would visit the states with other frequencies. "
        "Schulman et al. (2015, §3) bound the error by a multiple of the largest KL divergence between the two "
        "policies over the states. The next two sections keep $\\pi_\\theta$ close to $\\pi_{\\theta_{old}}$: "
        "TRPO with a constraint, PPO with a clip.",
    ]),
    Section("trust-region", "The trust region and the natural gradient", [
        "TRPO maximises the surrogate subject to a bound δ on the KL divergence from the old policy, "
        "averaged over the batch's states. The theory asks for the maximum over states. The mean stands in "
        "for it, since a maximum would be one constraint per state (Schulman et al. 2015, eqs. 11 and 12). The "
        "KL itself is computed in closed form ({sec:pieces}).",
        Eq("eq-trust-region", r"\max_\theta\ L(\theta) \quad \text{subject to} \quad \overline{\mathrm{KL}}(\theta)"
                              r" = \hat{\mathbb{E}}_{s}\left[\mathrm{KL}\big(\pi_{\theta_{old}}(\cdot|s)\,\|\,"
                              r"\pi_\theta(\cdot|s)\big)\right] \leq \delta",
           [Code("trpo", "mean_kl", "return kl.sum(-1).mean()")]),
        "It is solved approximately, with L to first order and the KL to second order around $\\theta_{old}$, "
        "with $\\Delta = \\theta - \\theta_{old}$. The KL has no constant or linear term. At Δ = 0 it is 0, its "
        "minimum, so its gradient is 0 there too.",
        Eq("eq-models", r"L(\theta_{old} + \Delta) \approx L(\theta_{old}) + g^\top\Delta, \qquad"
                        r" \overline{\mathrm{KL}}(\theta_{old} + \Delta) \approx \tfrac12\, \Delta^\top H \Delta,"
                        r" \qquad H = \nabla_\theta^2\, \overline{\mathrm{KL}}\,\big|_{\theta_{old}}"),
        "Differentiate $\\mathrm{KL} = \\sum_a \\pi_{\\theta_{old}}(\\log\\pi_{\\theta_{old}} - \\log\\pi_\\theta)$ "
        "twice. That leaves minus the expected Hessian of $\\log\\pi_\\theta$. Now "
        "$\\nabla^2\\log\\pi = \\nabla^2\\pi/\\pi - \\nabla\\log\\pi\\,\\nabla\\log\\pi^\\top$, and "
        "$\\sum_a \\nabla^2\\pi_\\theta(a|s) = \\nabla^2 1 = 0$. So at $\\theta_{old}$ it is the expected outer "
        "product of the score. H is the Fisher information matrix of the policy, averaged over states "
        "(Schulman et al. 2015, appendix C).",
        Eq("eq-fisher", r"\begin{array}{rl} H &= -\hat{\mathbb{E}}_s\,"
                        r" \mathbb{E}_{a\sim\pi_{\theta_{old}}}\big[\nabla_\theta^2\log\pi_\theta(a|s)\big] \\"
                        r" &= \hat{\mathbb{E}}_s\, \mathbb{E}_{a\sim\pi_{\theta_{old}}}\big[\nabla_\theta\log\pi_\theta(a|s)\,"
                        r" \nabla_\theta\log\pi_\theta(a|s)^\top\big] = F \end{array}"),
        "A linear objective on an ellipsoid: at the optimum g is parallel to $H\\Delta$, through a Lagrange "
        "multiplier. So Δ points along $H^{-1}g$, and the step goes to the boundary, where "
        "$\\tfrac12\\beta^2 (H^{-1}g)^\\top H (H^{-1}g) = \\tfrac12\\beta^2 g^\\top H^{-1} g = \\delta$ "
        "(Schulman et al. 2015, appendix C):",
        Eq("eq-natural-step", r"\Delta = \beta\, H^{-1} g, \qquad \beta = \frac{\sqrt{2\delta}}{\sqrt{g^\top H^{-1} g}}"),
        "$H^{-1}g$ is the natural gradient (Kakade 2002). It is the direction of steepest ascent when a step is "
        "measured by how much it changes the policy, the KL to second order, rather than by how far it moves "
        "the weights. The natural policy gradient takes a step of a set size along it. TRPO sizes the step "
        "from δ and then checks it (Schulman et al. 2015, §7). trpo.py solves the damped system "
        "$(H + cI)x = g$. H is estimated from one batch and can be near singular. The damping c "
        "(`--cg-damping`) keeps the system well conditioned. The step then uses $x^\\top(H+cI)x$ where "
        "{eq:eq-natural-step} has $g^\\top H^{-1}g$. The course brings the trust region in the step to "
        "{step:trpo}.",
        Eq("eq-damped-step", r"\begin{array}{c} x \approx (H + cI)^{-1} g, \qquad \Delta = \beta x, \\"
                             r" \tfrac12\beta^2\, x^\top(H+cI)x = \delta \quad\iff\quad"
                             r" \beta = \frac{\sqrt{2\delta}}{\sqrt{x^\top(H+cI)x}}"
                             r" \end{array}",
           [Code("trpo", "trpo_step", "x = conjugate_gradient(fvp, g, 10)"),
            Code("trpo", "trpo_step", "full_step = (2 * args.max_kl / (x @ fvp(x)).clamp_min(1e-30)) ** 0.5 * x")]),
        "For n weights H has n² entries, costly to form and to invert. Conjugate gradient never forms it. It "
        "needs only products Hv, and each is one more backward pass: differentiate the scalar "
        "$(\\nabla_\\theta\\overline{\\mathrm{KL}})^\\top v$, with v held fixed. Schulman et al. (2015, appendix "
        "C.1) compute the same product through the Jacobian of the distribution's parameters. Differentiating "
        "twice, as here, is the generic way they mention.",
        Eq("eq-fisher-vector", r"H v = \nabla_\theta\big((\nabla_\theta\overline{\mathrm{KL}})^\top v\big)",
           [Code("trpo", "fisher_vector_product", "kl_grad = flat_grad(kl, params, create_graph=True)"),
            Code("trpo", "fisher_vector_product", "return lambda v: flat_grad(kl_grad @ v, params, retain_graph=True)")]),
        "Conjugate gradient solves $Ax = b$, for A symmetric positive definite. It minimises "
        "$f(x) = \\tfrac12 x^\\top A x - b^\\top x$, whose gradient $Ax - b$ is minus the residual r. Each step "
        "minimises f exactly along the search direction p, and that is α. The next direction is made "
        "conjugate to the last ($p_{new}^\\top A p = 0$). For this method that makes it conjugate to all the "
        "earlier directions too (Nocedal & Wright 2006, Theorem 5.3). So each step minimises f over all the "
        "directions taken so far (their Theorem 5.2). In exact arithmetic it reaches the solution in at most "
        "n steps for n unknowns (Nocedal & Wright 2006, ch. 5). TRPO stops after 10 (Schulman et al. 2015, "
        "appendix C.1).",
        Eq("eq-conjugate-gradient", r"\alpha = \frac{r^\top r}{p^\top A p}, \qquad x \leftarrow x + \alpha p, \qquad"
                                    r" r_{new} = r - \alpha A p, \qquad p \leftarrow"
                                    r" r_{new} + \frac{r_{new}^\top r_{new}}{r^\top r}\, p",
           [Code("trpo", "conjugate_gradient", "alpha = r_dot_r / (p @ Ap)"),
            Code("trpo", "conjugate_gradient", "x, r = x + alpha * p, r - alpha * Ap"),
            Code("trpo", "conjugate_gradient", "p, r_dot_r = r + (new_r_dot_r / r_dot_r) * p, new_r_dot_r")]),
        "The step was sized on models, a linear L and a quadratic KL, which far from $\\theta_{old}$ can be "
        "wrong. The line search measures both. It shrinks the step geometrically and keeps the first that "
        "stays inside the region and raises L (Schulman et al. 2015, appendix C). If none does, θ stays. "
        "trpo.py tries $0.8^k$ for k = 0, …, 9.",
        Eq("eq-line-search", r"\theta = \theta_{old} + 0.8^k\, \beta x, \ k = 0, 1, \dots, 9: \quad \text{the first with} \quad"
                             r" \overline{\mathrm{KL}}(\theta) \leq \delta \ \text{ and } \ L(\theta) > L(\theta_{old})",
           [Code("trpo", "line_search", "nn.utils.vector_to_parameters(old_params + backtrack_coef**k * full_step, params)"),
            Code("trpo", "trpo_step", "return (mean_kl(agent, obs, old) <= args.max_kl"),
            Code("trpo", "trpo_step", "backtracks = line_search(params, full_step, acceptable, 0.8, 10)")]),
    ]),
    Section("clip", "The clipped surrogate", [
        "TRPO's constraint needs second-order machinery and takes one step per batch. PPO keeps first-order "
        "steps: many minibatch steps over several epochs on one batch. It changes the objective instead, so "
        "that the objective stops rewarding a policy that moves far from the one that collected the data "
        "(Schulman et al. 2017, eq. 7). The course brings the clip in the step to {step:ppo_1_clip}.",
        Eq("eq-clip", r"L^{CLIP}(\theta) = \hat{\mathbb{E}}_t\left[\min\big(r_t(\theta)\hat A_t,\ "
                      r"\mathrm{clip}(r_t(\theta), 1-\epsilon, 1+\epsilon)\, \hat A_t\big)\right]",
           each(PPO, "surrogate", "clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)",
                "return torch.min(ratio * advantages, clipped_ratio * advantages).mean()")),
        "What the min does depends on the sign of the advantage. For $\\hat A_t > 0$, multiplying by "
        "$\\hat A_t$ keeps the order, so the min picks the smaller ratio. Below 1 − ε the clip raises r, so "
        "there r itself is the smaller. For $\\hat A_t < 0$ the order flips and the min picks the larger ratio.",
        Eq("eq-clip-cases", r"\min\big(r\hat A,\ \mathrm{clip}(r, 1-\epsilon, 1+\epsilon)\hat A\big) ="
                            r" \begin{cases} \hat A\, \min(r,\ 1+\epsilon) & \hat A > 0 \\"
                            r" \hat A\, \max(r,\ 1-\epsilon) & \hat A < 0 \end{cases}"),
        "Take $\\hat A_t > 0$: the action did better than expected. The term grows with $r_t$ up to 1 + ε and "
        "is flat beyond. Once $\\pi_\\theta$ makes the action 1 + ε times as likely as $\\pi_{\\theta_{old}}$ "
        "did, this sample's gradient is zero. Below 1 − ε it keeps its full slope, so a step that made a good "
        "action less likely is pulled back. $\\hat A_t < 0$ is the mirror image. The term rises as $r_t$ "
        "falls, down to 1 − ε, and is flat below. Above 1 + ε a bad action was made more likely. There the "
        "unclipped term is the minimum, and its gradient pushes $r_t$ back down. The derivative of a sample's "
        "term $\\ell_t = \\min(r_t\\hat A_t, \\mathrm{clip}(r_t, 1-\\epsilon, 1+\\epsilon)\\hat A_t)$, away from "
        "the kinks at 1 ± ε:",
        Eq("eq-clip-gradient", r"\frac{\partial \ell_t}{\partial r_t} ="
                               r" \begin{cases} 0 & \hat A_t > 0,\ r_t > 1+\epsilon"
                               r" \ \text{ or } \ \hat A_t < 0,\ r_t < 1-\epsilon \\"
                               r" \hat A_t & \text{otherwise} \end{cases}",
           each(PPO, "surrogate", "return torch.min(ratio * advantages, clipped_ratio * advantages).mean()")),
        "So the most a sample's term can gain by moving $r_t$ from 1 is $\\epsilon|\\hat A_t|$. Gradient "
        "ascent has no reason to push $r_t$ beyond 1 ± ε in the direction its advantage favours. That removes "
        "the incentive, not the possibility. The samples share the weights, and the others can carry $r_t$ "
        "past the clip. The PPO scripts log the share of samples outside [1 − ε, 1 + ε] as `clipfrac`. Taking "
        "the min also makes $L^{CLIP}$ a lower bound on $L^{CPI}$ (Schulman et al. 2017, §3). The two agree to "
        "first order at $\\theta_{old}$, because near $r_t = 1$ the clip is inactive and both terms are "
        "$r_t\\hat A_t$. In the first minibatch of an update the ratios are 1. There the gradient of "
        "$L^{CLIP}$ is the policy gradient {eq:eq-surrogate-gradient} of that minibatch.",
        Eq("eq-clip-bound", r"L^{CLIP}(\theta) \leq L^{CPI}(\theta) = \hat{\mathbb{E}}_t\big[r_t(\theta)\hat A_t\big], \qquad"
                            r" \nabla_\theta L^{CLIP}(\theta_{old}) = \nabla_\theta L^{CPI}(\theta_{old})"),
        "The PPO scripts train actor and critic with one loss, the negative of the objective of Schulman et "
        "al. (2017, eq. 9). It has three terms. The clipped surrogate comes first. A value error follows, "
        "weighted by $c_1$ (`--vf-coef`). An entropy bonus weighted by $c_2$ (`--ent-coef`) keeps the policy "
        "exploring. $c_2$ is 0.01 in ppo_discrete.py, and 0, no bonus, by default in ppo_continuous.py and "
        "ppo_recurrent.py. Where the actor and the critic share weights, $c_1$ also sets how far the value "
        "error moves them against the policy's terms. ppo_atari.py's actor and critic share an encoder, "
        "which the course brings in the step to {step:ppo_atari_1_encoder}.",
        Eq("eq-ppo-loss", r"L(\theta) = -L^{CLIP} + c_1 L^{V} - c_2\, \hat{\mathbb{E}}_t\big[H(\pi_\theta(\cdot|s_t))\big]",
           each(PPO, "ppo_loss", "pg_loss = -surrogate(ratio, advantages, clip_coef)",
                "loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss")),
        "The paper's value error is the plain squared error. PPO's reference code, OpenAI Baselines' ppo2, "
        "also clips the critic's change (Huang et al. 2022, core detail 9). It keeps a clipped prediction "
        "$V^{clip}$ within ε of the rollout's prediction $V_{old}$, with the ε of the ratio's clip. It then "
        "takes the larger of the two squared errors. What that does to one sample's gradient:",
        "- While $V_\\theta(s_t)$ stays within ε of $V_{old}$, the two errors are equal and the gradient is "
        "the plain one.\n"
        "- Once $V_\\theta(s_t)$ is more than ε from $V_{old}$, $V^{clip}$ stays at $V_{old} \\pm \\epsilon$. If "
        "$V_\\theta(s_t)$ is now nearer the target $\\hat R_t$ than $V^{clip}$ is, the clipped error is the "
        "larger. Its gradient is zero, so this sample stops pulling V further.\n"
        "- If $V_\\theta(s_t)$ is farther from the target than $V^{clip}$ is, the plain error is the larger. "
        "Its full gradient pulls V back toward the target. That happens when V moved away from the target, "
        "or past it.\n"
        "So it is the critic's analogue of the min in $L^{CLIP}$. As there, other samples can still carry V "
        "past the clip, since they share the weights.",
        "The same ε means something else here. For the ratio it has no unit: 0.2 allows a 20% change of a "
        "probability. For V it is in the units of the return. ppo_discrete.py leaves CartPole's rewards "
        "unscaled: each step gives 1. With γ = 0.99 the targets approach $1/(1-\\gamma) = 100$ as episodes "
        "grow long. A sample then stops pulling its prediction after 0.2 of a gap that can be tens. "
        "ppo_continuous.py scales its rewards ({eq:eq-reward-scaling}), so there ε is measured against returns "
        "of order 1. Stable-Baselines3's documentation warns that its value clip, `clip_range_vf`, depends on "
        "the reward scaling.",
        "The published evidence does not favour the clip. Engstrom et al. (2020) found no evidence that it helps. "
        "Andrychowicz et al. (2021, choice C13, their figure 43) found that it hurts, whatever its threshold, "
        "on five continuous-control tasks. This project's own ablation of `--no-clip-vloss` "
        "(benchmarks/ABLATIONS.md) finds the opposite so far: the clip helps on CartPole-v1 and, a "
        "little, on Pendulum-v1, each over five seeds. Hopper-v4 has not been run yet. Why it helps here "
        "was not measured. ppo_discrete.py and "
        "ppo_continuous.py clip by default, as the reference code does, and `--no-clip-vloss` turns it off. "
        "ppo_recurrent.py clips only with `--clip-vloss`, since RL Zoo and SB3 do not clip by default. "
        "The course brings the clip, with the other details of the reference code, in the step to "
        "{step:ppo_discrete}.",
        "Like ppo2, the PPO scripts also halve the squared error. So $c_1$ = 0.5, `--vf-coef`'s default, "
        "weighs it by ¼. Without the clip their value error is "
        "$\\tfrac12\\hat{\\mathbb{E}}_t[(V_\\theta(s_t) - \\hat R_t)^2]$.",
        Eq("eq-value-clip", r"\begin{array}{rl} V^{clip} &= V_{old} + \mathrm{clip}\big(V_\theta(s_t)"
                            r" - V_{old},\ -\epsilon,\ \epsilon\big) \\"
                            r" L^{V} &= \tfrac12\, \hat{\mathbb{E}}_t\left[\max\big((V_\theta(s_t)"
                            r" - \hat R_t)^2,\ (V^{clip} - \hat R_t)^2\big)\right]"
                            r" \end{array}",
           each(PPO, "ppo_loss", "v_clipped = old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)",
                "v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2).mean()")),
    ]),
    Section("recurrent", "The gradient through time over a segment", [
        "ppo_recurrent.py gives the actor and the critic a memory, for envs whose observation leaves out "
        "what the agent must remember. The course brings it in the step to {step:ppo_recurrent}. The actor "
        "reads each observation through an LSTM. Its state $h_t$ stands here for the LSTM's two vectors, h and "
        "c. The state after step t is computed from the state before it and the observation $s_t$, with the "
        "weights θ. The action is drawn from a distribution on that state, not on $s_t$ alone. The critic has "
        "an LSTM of its own, built the same way.",
        Eq("eq-recurrent-policy", r"h_t = f_\theta(h_{t-1}, s_t), \qquad a_t \sim \pi_\theta(\cdot|h_t)",
           [Code("ppo_recurrent", "Agent.unroll",
                 "out, (h_actor, c_actor) = self.actor_lstm(obs[begin:end], (h_actor, c_actor))"),
            Code("ppo_recurrent", "Agent.get_action_and_value", "logits = self.actor_head(actor_out)")]),
        "A rollout is a segment of T steps per env. Its first step starts from a stored state $h_{-1}$: the "
        "state that the env's last segment ended with, or 0 at the run's start. So $h_t$ depends on θ through "
        "every step of the segment up to t. The chain rule then runs back through all those steps. This is "
        "backpropagation through time over the segment. The stored $h_{-1}$ is a constant: the rollout "
        "computed it without a gradient. The gradient is therefore truncated at the segment's start.",
        Eq("eq-bptt", r"\begin{array}{rl} \nabla_\theta \log\pi_\theta(a_t|h_t) &= \frac{\partial \log\pi_\theta(a_t|h_t)}"
                      r"{\partial\theta} + \frac{\partial \log\pi_\theta(a_t|h_t)}{\partial h_t}\, \frac{dh_t}{d\theta} \\"
                      r" \frac{dh_t}{d\theta} &= \frac{\partial f_\theta}{\partial\theta} + \frac{\partial f_\theta}"
                      r"{\partial h_{t-1}}\, \frac{dh_{t-1}}{d\theta}, \qquad \frac{dh_{-1}}{d\theta} = 0 \end{array}",
           [Code("ppo_recurrent", "train", "start_state = next_state.clone()"),
            Code("ppo_recurrent", "train", "loss.backward()")]),
        "The update replays each segment from its stored start state. The reason is the ratio of "
        "{eq:eq-ratio}. The replay computes its numerator. The rollout stored its denominator. "
        "At $\\theta = \\theta_{old}$ the ratio must be 1, so that the surrogate's gradient there is the "
        "policy gradient {eq:eq-surrogate-gradient}. That holds only if the replay computes the very $h_t$ "
        "that the rollout acted with. From the second segment on, the stored state is not zero. A replay "
        "from a zero state then gives another $h_t$ at each step before the segment's first episode start. "
        "At those steps the ratio at $\\theta_{old}$ is in general not 1. The replay also needs the "
        "rollout's resets, at the same steps. With both, the first minibatch of an update has ratio 1, up to "
        "rounding. The rollout runs the LSTM one step per call and the replay a stretch of steps per call. "
        "The two compute the same function, but not always with the same rounding. oneDNN picks the LSTM's "
        "kernel by CPU. In the tests' run on a CPU with AVX2 and no AVX-512, the replay's log π differs from "
        "the rollout's by up to 1.2e-7. The tests hold the first minibatch's log π and V within 1e-6 "
        "(relative and absolute) of the rollout's, with 4 envs in one minibatch and with 2 in each of two.",
        Eq("eq-replay", r"r_t(\theta) = \frac{\pi_\theta(a_t|h_t)}{\pi_{\theta_{old}}(a_t|h_t^{old})}, \qquad"
                        r" h_{-1} = h_{-1}^{old} \ \Rightarrow\ h_t = h_t^{old} \text{ at } \theta = \theta_{old}"
                        r" \ \Rightarrow\ r_t(\theta_{old}) = 1",
           [Code("ppo_recurrent", "train", "obs[:, mb], start_state[mb], episode_starts[:, mb], actions[:, mb])")]),
        "This is why a minibatch holds whole sequences of T steps: those of a random set of N/M envs. A step drawn "
        "alone from the batch would have no stored state to start from.",
        "An episode may start inside the segment. Before that step, the state is multiplied by 0, so the new "
        "episode starts from the zero state, as at the very start. The product with 0 has a zero derivative. "
        "So no gradient flows from a step of one episode into the steps of the episode before it. The chain "
        "of {eq:eq-bptt} stops at each episode's first step. An LSTM call cannot reset its state midway. So "
        "the unroll cuts the segment before each step where some env's episode starts, and runs each stretch "
        "in one call.",
        Eq("eq-state-reset", r"(h_{t-1}, c_{t-1}) \leftarrow (1 - \mathrm{start}_t)\,(h_{t-1}, c_{t-1}), \qquad"
                             r" \frac{\partial h_t}{\partial h_{t-1}} = 0 \ \text{ where } \mathrm{start}_t = 1",
           [Code("ppo_recurrent", "Agent.unroll", "state = state * (1.0 - episode_starts[begin])[:, None]"),
            Code("ppo_recurrent", "train", "next_episode_start_np = (terminated | truncated).astype(np.float32)")]),
    ]),
    Section("pieces", "The pieces: log-densities, entropies, KL divergences, normalisation", [
        "The equations above need a few formulas that belong to the distributions or to the data rather than "
        "to the algorithm. A categorical policy (discrete actions) outputs logits z and is their softmax. Its "
        "log-probability is computed with `logsumexp`, which avoids overflowing exponentials.",
        Eq("eq-log-softmax", r"\pi_\theta(a|s) = \frac{e^{z_a}}{\sum_b e^{z_b}},"
                             r" \qquad \log\pi_\theta(a|s) = z_a - \log\sum_b e^{z_b}",
           heads(["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_atari", "ppo_recurrent"],
                 "log_pi = logits - logits.logsumexp(-1, keepdim=True)")),
        "A Gaussian policy (continuous actions) draws each component $a_j$ of the action independently from "
        "$\\mathcal{N}(\\mu_{\\theta,j}(s), \\sigma_j^2)$. So the density is a product and the log-densities add "
        "up. The course brings the Gaussian head in the step to {step:ppo_continuous_1_gaussian}.",
        Eq("eq-log-gaussian", r"\begin{array}{rl} \log\pi_\theta(a|s) &= \sum_j"
                              r" \log\mathcal{N}\big(a_j; \mu_{\theta,j}(s), \sigma_j^2\big) \\"
                              r" \log\mathcal{N}(a; \mu, \sigma^2) &= -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}"
                              r" \end{array}",
           heads(["reinforce", "vpg", "trpo", "ppo_continuous", "ppo_recurrent"],
                 "log_density = (-((action - mean) ** 2) / (2 * std**2)",
                 "logprob = log_density.sum(-1)")),
        "The entropy is the expected negative log-probability. For the Gaussian, "
        "$\\mathbb{E}[(a-\\mu)^2] = \\sigma^2$, which makes the first term ½. So the entropy depends on σ alone, "
        "which here is the same in every state. A Gaussian policy's entropy is the sum of this over the "
        "action's components.",
        Eq("eq-entropy", r"\begin{array}{rl} H\big[\pi_\theta(\cdot|s)\big] &= -\sum_a \pi_\theta(a|s)\log\pi_\theta(a|s) \\"
                         r" H\big[\mathcal{N}(\mu, \sigma^2)\big] &="
                         r" \frac{\mathbb{E}\big[(a-\mu)^2\big]}{2\sigma^2} + \log\sigma + \tfrac12\log 2\pi"
                         r" = \tfrac12 + \tfrac12\log 2\pi + \log\sigma \end{array}",
           heads(["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_atari", "ppo_recurrent"],
                 "entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)")
           + heads(["reinforce", "vpg", "trpo", "ppo_continuous", "ppo_recurrent"],
                   "entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log())")),
        "TRPO's constraint uses the KL divergence in closed form. For the Gaussian it is computed per action "
        "dimension: the dimensions are independent, so the KLs add up. For the categorical it is a sum over "
        "the actions.",
        Eq("eq-kl-closed", r"\begin{array}{rl} \mathrm{KL}\big(\mathcal{N}(\mu_{old},"
                           r" \sigma_{old}^2)\,\|\,\mathcal{N}(\mu, \sigma^2)\big)"
                           r" &= \log\sigma - \log\sigma_{old} + \frac{\sigma_{old}^2"
                           r" + (\mu_{old} - \mu)^2}{2\sigma^2} - \tfrac12 \\"
                           r" \mathrm{KL}\big(\pi_{old}(\cdot|s)\,\|\,\pi_\theta(\cdot|s)\big)"
                           r" &= \sum_a \pi_{old}(a|s)\big(\log\pi_{old}(a|s) - \log\pi_\theta(a|s)\big) \end{array}",
           [Code("trpo", "mean_kl", "kl = (logstd - old_logstd - 0.5"),
            Code("trpo", "mean_kl", "kl = old_log_pi.exp() * (old_log_pi - log_pi)")]),
        "trpo.py logs the mean KL that an update reached, by this closed form, under its own name, `kl`. The "
        "other scripts log an estimate under another name, `approx_kl`. They "
        "estimate how far an update moved the policy from the batch's own samples "
        "$a \\sim \\pi_{old}$, with $r = \\pi_\\theta/\\pi_{old}$ (J. Schulman, \"Approximating KL divergence\", "
        "2020). They use it for the logs, and for PPO's optional early stop, `--target-kl`. $k_1$ is unbiased "
        "by definition of the KL, but can be negative. Adding $r - 1$ keeps the estimate unbiased, since "
        "$\\mathbb{E}_{a\\sim\\pi_{old}}[r] = \\sum_a \\pi_\\theta(a|s) = 1$. And since $\\log r \\leq r - 1$, "
        "$k_3$ is never negative.",
        Eq("eq-kl-estimators", r"k_1 = -\log r, \qquad k_3 = (r - 1) - \log r, \qquad"
                               r" \mathbb{E}_{a\sim\pi_{old}}[k_1] = \mathbb{E}_{a\sim\pi_{old}}[k_3]"
                               r" = \mathrm{KL}\big(\pi_{old}\,\|\,\pi_\theta\big)",
           each(["reinforce", "vpg"], "train", "approx_kl = ((logratio.exp() - 1) - logratio).mean()")
           + each(PPO, "ppo_loss", '"old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),')),
        "ppo_continuous.py normalises what the networks see and what the critic learns (Huang et al. 2022, "
        "continuous details 6 to 9). Its running statistics keep a summary: count n, mean μ, variance σ². "
        "Each new batch B is merged into it with the parallel formula of Chan, Golub and LeVeque (1979). The "
        "result is the mean and variance of the old and the new samples together, computed from the two "
        "summaries alone.",
        Eq("eq-running-moments", r"\delta = \mu_B - \mu, \quad N = n + n_B, \quad"
                                 r" \mu \leftarrow \mu + \delta\, \frac{n_B}{N}, \quad"
                                 r" \sigma^2 \leftarrow \frac{n\sigma^2 + n_B\sigma_B^2 + \delta^2\, n\, n_B / N}{N}",
           each(["ppo_continuous", "ppo_recurrent"], "RunningMeanStd.update",
                "delta, total = batch_mean - self.mean, self.count + batch_count",
                "self.mean = self.mean + delta * batch_count / total",
                "m2 = (self.var * self.count + batch_var * batch_count")),
        "Each observation feature is brought to mean 0 and standard deviation 1 under those statistics, and "
        "clipped to ±c (c = 10). ppo_recurrent.py normalises its observations the same way. The course brings "
        "the observations' normalisation in the step to {step:ppo_continuous_2_norm}.",
        Eq("eq-normalise-observation", r"\tilde s = \mathrm{clip}\big((s - \mu_s) / \sqrt{\sigma_s^2 + 10^{-8}},\ -c,\ c\big)",
           each(["ppo_continuous", "ppo_recurrent"], "Agent.normalize_obs", "normalized = (obs - self.obs_rms.mean) / np.sqrt(")),
        "Rewards are divided by the standard deviation of $R_t$, a running discounted sum of each env's past "
        "rewards, restarted at each episode. They are not divided by the standard deviation of the rewards "
        "themselves. The mean is not subtracted, so each reward keeps its sign. ppo_recurrent.py scales its "
        "rewards the same way. The course brings the reward scaling in the step to "
        "{step:ppo_continuous_1b_reward_scaling}.",
        Eq("eq-reward-scaling", r"R_t = \gamma R_{t-1} + r_t, \qquad \tilde r_t = \mathrm{clip}\big(r_t"
                                r" / \sqrt{\mathrm{Var}[R] + 10^{-8}},\ -c,\ c\big)",
           each(["ppo_continuous", "ppo_recurrent"], "RewardScaler.scale",
                "self.discounted_return = self.gamma * self.discounted_return + reward",
                "scaled = reward / np.sqrt(self.return_rms.var + 1e-8)")),
    ]),
]

# Each `# math:` line of the scripts (its LaTeX, spaces collapsed) -> the equation here that it
# links back to.
MATH_LINKS = {
    r"\log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)": "eq-log-gaussian",
    r"\log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}": "eq-log-gaussian",
    r"H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)": "eq-entropy",
    r"\log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}": "eq-log-softmax",
    r"H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)": "eq-entropy",
    r"\hat g = \frac{1}{|D|} \sum_\tau \sum_t \nabla_\theta \log \pi_\theta(a_t|s_t)\, G_t": "eq-reinforce-estimate",
    r"L(\theta) = -\frac{1}{B}\sum_t \log \pi_\theta(a_t|s_t)\, G_t": "eq-reinforce-loss",
    r"-\nabla_\theta L = \frac{|D|}{B}\, \hat g": "eq-reinforce-loss",
    r"k_3 = \mathbb{E}_t[(r_t - 1) - \log r_t]": "eq-kl-estimators",
    r"k_1 = -\log r_t(\theta), \qquad k_3 = (r_t(\theta) - 1) - \log r_t(\theta)": "eq-kl-estimators",
    r"L^{PG}(\theta) = -\frac{1}{B}\sum_{t} \log \pi_\theta(a_t|s_t)\, \hat A_t": "eq-vpg-loss",
    r"-\nabla_\theta L^{PG} = \frac{1}{B}\sum_t \nabla_\theta\log\pi_\theta(a_t|s_t)\,\hat A_t": "eq-vpg-loss",
    r"L^{V}(\phi) = \frac{1}{B}\sum_t \big(V_\phi(s_t) - \hat R_t\big)^2": "eq-critic-loss",
    r"\hat R_t = \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})": "eq-gae-returns",
    r"L(\theta) = \frac{1}{B}\sum_t r_t(\theta)\, \hat A_t": "eq-surrogate",
    r"r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)": "eq-ratio",
    r"\mathrm{KL}_j = \log\sigma_j - \log\sigma_{old,j}": "eq-kl-closed",
    r"\qquad + (\sigma_{old,j}^2 + (\mu_{old,j} - \mu_j)^2) / (2\sigma_j^2) - \tfrac12": "eq-kl-closed",
    r"\mathrm{KL} = \sum_a \pi_{old}(a|s)\, (\log\pi_{old}(a|s) - \log\pi_\theta(a|s))": "eq-kl-closed",
    r"H v = \nabla_\theta \big( (\nabla_\theta \overline{\mathrm{KL}})^\top v \big)": "eq-fisher-vector",
    r"\alpha = r^\top r / p^\top A p": "eq-conjugate-gradient",
    r"x \leftarrow x + \alpha p, \quad r \leftarrow r - \alpha A p": "eq-conjugate-gradient",
    r"p \leftarrow r + \frac{r_{new}^\top r_{new}}{r^\top r}\, p": "eq-conjugate-gradient",
    r"\tfrac12 \beta^2 x^\top(H+cI)x = \delta \iff \beta = \sqrt{2\delta / x^\top(H+cI)x}": "eq-damped-step",
    r"L^{CLIP}(\theta) = \frac{1}{B}\sum_t \min(r_t \hat A_t,\ \bar r_t \hat A_t)": "eq-clip",
    r"\bar r_t = \mathrm{clip}(r_t(\theta),\ 1 - \epsilon,\ 1 + \epsilon)": "eq-clip",
    r"V^{clip} = V_{old} + \mathrm{clip}(V_\theta(s_t) - V_{old},\ -\epsilon,\ \epsilon)": "eq-value-clip",
    r"L^{V}(\theta) = \tfrac12 \mathbb{E}_t[\max((V_\theta(s_t) - R_t)^2, (V^{clip} - R_t)^2)]": "eq-value-clip",
    r"L(\theta) = -L^{CLIP} + c_1 L^{V} - c_2\, \mathbb{E}_t[H(\pi_\theta(\cdot|s_t))]": "eq-ppo-loss",
    r"\delta = \mu_B - \mu, \quad N = n + n_B, \quad \mu \leftarrow \mu + \delta\, n_B / N": "eq-running-moments",
    r"\sigma^2 \leftarrow (n\sigma^2 + n_B\sigma_B^2 + \delta^2 n\, n_B / N) / N": "eq-running-moments",
    r"\tilde s = \mathrm{clip}\big((s - \mu_s) / \sqrt{\sigma_s^2 + 10^{-8}},\ -c,\ c\big)": "eq-normalise-observation",
    r"R_t = \gamma R_{t-1} + r_t": "eq-reward-scaling",
    r"\tilde r_t = \mathrm{clip}\big(r_t / \sqrt{\mathrm{Var}[R] + 10^{-8}},\ -c,\ c\big)": "eq-reward-scaling",
    r"(h_{t-1}, c_{t-1}) \leftarrow (1 - \mathrm{start}_t)\,(h_{t-1}, c_{t-1})": "eq-state-reset",
}

REFERENCES = [
    "M. Andrychowicz, A. Raichuk, P. Stańczyk, M. Orsini, S. Girgin, R. Marinier, L. Hussenot, M. Geist, "
    "O. Pietquin, M. Michalski, S. Gelly, O. Bachem (2021). What matters in on-policy reinforcement learning? "
    "A large-scale empirical study. ICLR.",
    "T. F. Chan, G. H. Golub, R. J. LeVeque (1979). Updating formulae and a pairwise algorithm for computing "
    "sample variances. Stanford University technical report.",
    "L. Engstrom, A. Ilyas, S. Santurkar, D. Tsipras, F. Janoos, L. Rudolph, A. Madry (2020). Implementation "
    "matters in deep policy gradients: a case study on PPO and TRPO. ICLR.",
    "S. Huang, R. F. J. Dossa, A. Raffin, A. Kanervisto, W. Wang (2022). The 37 implementation details of "
    "proximal policy optimization. ICLR Blog Track.",
    "S. Kakade (2002). A natural policy gradient. NeurIPS 14.",
    "S. Kakade, J. Langford (2002). Approximately optimal approximate reinforcement learning. ICML.",
    "J. Nocedal, S. J. Wright (2006). Numerical optimization, 2nd edition. Springer. Chapter 5: conjugate "
    "gradient methods.",
    "F. Pardo, A. Tavakoli, V. Levdik, P. Kormushev (2018). Time limits in reinforcement learning. ICML.",
    "J. Schulman (2020). Approximating KL divergence. Blog post.",
    "J. Schulman, S. Levine, P. Moritz, M. Jordan, P. Abbeel (2015). Trust region policy optimization. ICML; "
    "arXiv:1502.05477.",
    "J. Schulman, P. Moritz, S. Levine, M. Jordan, P. Abbeel (2016). High-dimensional continuous control using "
    "generalized advantage estimation. ICLR; arXiv:1506.02438.",
    "J. Schulman, F. Wolski, P. Dhariwal, A. Radford, O. Klimov (2017). Proximal policy optimization "
    "algorithms. arXiv:1707.06347.",
    "R. S. Sutton, A. G. Barto (2018). Reinforcement learning: an introduction, 2nd edition. MIT Press.",
    "R. S. Sutton, D. McAllester, S. Singh, Y. Mansour (2000). Policy gradient methods for reinforcement "
    "learning with function approximation. NeurIPS 12.",
    "R. J. Williams (1992). Simple statistical gradient-following algorithms for connectionist reinforcement "
    "learning. Machine Learning 8.",
]

CSS = """
.derivations header, .derivations .intro, .derivations nav.pages, .derivations section, .derivations .references {
  box-sizing: border-box; max-width: 1348px; margin: 0 auto; }
.derivations .intro p, .derivations .intro ol { max-width: 44em; }
.derivation code { white-space: nowrap; }
.derivations h2 { font-size: 21px; margin: 34px 24px 6px; padding-top: 8px; border-top: 2px solid #ddd; }
.dstep { display: grid; grid-template-columns: minmax(0, 44em) minmax(0, 1fr); column-gap: 20px; padding: 0 24px; }
.dstep > .derivation p { margin: 8px 0; }
.eqn { display: flex; flex-wrap: wrap; align-items: center; justify-content: flex-end; column-gap: 12px; }
.eqn > math { flex: 1 0 auto; min-width: 0; }  /* a wide equation whole, and its number below it */
.eqn mtd { math-style: normal; } .eqn mtd[columnalign="right"] { text-align: right; }
.eqn mtd[columnalign="left"] { text-align: left; } .eqn mtd[columnalign="center"] { text-align: center; }
.eqno { color: #5a5a66; white-space: nowrap; }
.impl { align-self: end; padding: 4px 0; min-width: 0; }
.impl .line { margin: 6px 0; }
.impl pre { margin: 0; padding: 4px 8px; background: #f4f4f6; border-radius: 4px;
            font: 12.5px/1.45 ui-monospace, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
.impl .where { font-size: 13px; color: #5a5a66; }
.dstep:target { background: #fff8dc; }
.derivations .references { padding: 0 24px 24px; font-size: 14px; }
.derivation ul { margin: 6px 0; padding-left: 22px; } .derivation li { margin: 3px 0; }
.derivations .references h2 { margin-left: 0; margin-right: 0; } .derivations .references ul { max-width: 50em; }
"""


def build_module():
    """docs/build.py, for its typesetting and page helpers (imported when first needed: build.py
    imports this module)."""
    if "build" not in sys.modules:
        import build  # noqa: F401
    return sys.modules["build"]


def equations() -> dict[str, tuple[int, int, Eq]]:
    """id -> (section number, equation number within it, the equation)."""
    found = {}
    for s, section in enumerate(SECTIONS, 1):
        numbered = [block for block in section.blocks if isinstance(block, Eq)]
        for e, eq in enumerate(numbered, 1):
            if eq.id in found:
                raise ValueError(f"derivations: equation id {eq.id} is used twice")
            found[eq.id] = (s, e, eq)
    return found


def section_of(eq_id: str) -> tuple[int, Section]:
    s, _, _ = equations()[eq_id]
    return s, SECTIONS[s - 1]


def normalised(latex: str) -> str:
    return " ".join(latex.split())


LINKS = {normalised(latex): eq_id for latex, eq_id in MATH_LINKS.items()}


# --- finding lines in the scripts ---

def script_lines(script: str) -> list[str]:
    return (build_module().ROOT / f"{script}.py").read_text().split("\n")


def definition(tree: ast.Module, where: str, script: str) -> ast.AST:
    """The node of `where`, a top-level definition or a method ("Agent.get_action")."""
    body, node = tree.body, None
    for part in where.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise ValueError(f"derivations: {script}.py has no definition {where}")
        body = node.body
    return node


def resolve(code: Code) -> int:
    """The line number that `code` names; a name or text that finds no line, or two, stops the build."""
    return resolve_in(code, (build_module().ROOT / f"{code.script}.py").read_text())


@functools.lru_cache(maxsize=1024)
def resolve_in(code: Code, source: str) -> int:
    lines = source.split("\n")
    node = definition(parsed(source), code.where, code.script)
    if code.text is None:
        return node.lineno
    docstring = set(range(node.body[0].lineno, node.body[0].end_lineno + 1)) if ast.get_docstring(node) else set()
    comments = comments_of(source)
    found = [n for n in range(node.lineno, node.end_lineno + 1)
             if code.text in lines[n - 1] and n not in docstring and n not in comments]
    if len(found) != 1:
        raise ValueError(f"derivations: {code.where} in {code.script}.py has {len(found)} lines of code containing "
                         f"{code.text!r}, not one: update derivations.py")
    return found[0]


@functools.lru_cache(maxsize=16)
def parsed(source: str) -> ast.Module:
    return ast.parse(source)


@functools.lru_cache(maxsize=16)
def comments_of(source: str) -> set[int]:
    return build_module().comment_lines(source)


def math_lines(script: str) -> list[tuple[int, str]]:
    """(line number, LaTeX) of each `# math:` line of a script."""
    return [(n, m[1]) for n, line in enumerate(script_lines(script), 1)
            if (m := build_module().MATH.match(line.strip()))]


# --- the backlinks on the script pages ---

def target(script: str, number: int, latex: str) -> str:
    """The id of the equation here that the `# math:` line `number` of a script links to."""
    line = script_lines(script)[number - 1].strip()
    if line != f"# math: {latex}":
        raise ValueError(f"derivations: line {number} of {script}.py is not the `# math:` line {latex!r}")
    eq_id = LINKS.get(normalised(latex))
    if eq_id is None:
        raise ValueError(f"derivations: {script}.py line {number}, `# math: {latex}`, links to no derivation: "
                         "add its LaTeX to derivations.MATH_LINKS")
    return eq_id


def backlink(script: str, number: int, latex: str, mathml: str) -> str:
    """A typeset `# math:` equation of a script page with its link to the derivation."""
    eq_id = target(script, number, latex)
    s, e, _ = equations()[eq_id]
    title = f"{s}. {SECTIONS[s - 1].title}, equation ({s}.{e})"
    return (f'<div class="eq">{mathml}<a class="derivation" href="{PAGE}#{eq_id}" '
            f'title="{html.escape(title)}">↗ derivation §{s}</a></div>')


# --- the page ---

def converted(latex: str, mathml: str) -> str:
    """MathML that latex2mathml made whole; an error, a command left as text (even `\\|`) or an
    environment it does not know (`aligned` leaves its `&` as a letter) stops the build."""
    if "merror" in mathml or re.search(r">\\", mathml) or "<mi>&</mi>" in mathml:
        raise ValueError(f"derivations: formula does not convert: {latex}")
    return mathml


def display(latex: str) -> str:
    return converted(latex, build_module().math(latex))


def inline(latex: str) -> str:
    return f'<span class="nowrap">{converted(latex, build_module().typeset(latex))}</span>'


def text(source: str) -> str:
    """A paragraph: $...$ typeset, {eq:id} and {sec:id} as links, {step:name} as a link to the step
    of the course that leads to the file `name` (see `step_target`), the rest as the scripts' prose."""
    b, found = build_module(), equations()
    out = []
    for part in re.split(r"(\$[^$]+\$|\{eq:[\w-]+\}|\{sec:[\w-]+\}|\{step:\w+\})", source):
        if part.startswith("$") and part.endswith("$") and len(part) > 1:
            out.append(inline(part[1:-1]))
        elif m := re.fullmatch(r"\{eq:([\w-]+)\}", part):
            if m[1] not in found:
                raise ValueError(f"derivations: a paragraph refers to no equation {m[1]}")
            s, e, _ = found[m[1]]
            out.append(f'<a href="#{m[1]}">({s}.{e})</a>')
        elif m := re.fullmatch(r"\{sec:([\w-]+)\}", part):
            s = next((i for i, section in enumerate(SECTIONS, 1) if section.id == m[1]), None)
            if s is None:
                raise ValueError(f"derivations: a paragraph refers to no section {m[1]}")
            out.append(f'<a href="#{m[1]}">§{s}</a>')
        elif m := re.fullmatch(r"\{step:(\w+)\}", part):
            href, before = step_target(m[1])
            title = f"the step {b.file_of(before)} → {b.file_of(m[1])}, on its step page"
            out.append(f'<a class="steplink" href="{href}" title="{html.escape(title)}">{b.file_of(m[1])}</a>')
        else:
            out.append(b.prose(part))
    return "".join(out)


def step_target(name: str) -> tuple[str, str]:
    """(the link, the file before it) of the step of the course that leads to the file `name`, a
    script or a file in steps/: the first step page (build.STEPS) whose chain of files holds it.
    A name that no step leads to stops the build."""
    b = build_module()
    for old, new in b.STEPS:
        chain = [old, *b.SUBSTEPS.get((old, new), []), new]
        if name in chain[1:]:
            k = chain.index(name)
            return f"{old}-to-{new}.html#step-{k}", chain[k - 1]
    raise ValueError(f"derivations: a paragraph links to {{step:{name}}}, but no step of the course leads to "
                     f"{name}: update derivations.py")


def paragraphs_html(source: str) -> str:
    """A block of text: paragraphs, and a line that starts with "- " as an item of a list."""
    out, items = [], []
    for line in source.split("\n"):
        if line.startswith("- "):
            items.append(f"<li>{text(line[2:])}</li>")
            continue
        if items:
            out.append(f"<ul>{''.join(items)}</ul>")
            items = []
        out.append(f"<p>{text(line)}</p>")
    if items:
        out.append(f"<ul>{''.join(items)}</ul>")
    return "".join(out)


def code_backlinks(script: str, code: set[int], notes: str) -> str:
    """The links back from a section of a script's page (its code lines `code`, its notes' HTML
    `notes`) to each equation here that those lines compute, but for those its `# math:` lines
    already link: so every function that computes an equation links to its derivation."""
    shown = set(re.findall(rf'href="{re.escape(PAGE)}#([\w-]+)"', notes))
    places: dict[int, list[tuple[int, str]]] = {}
    for eq_id, (s, e, eq) in equations().items():
        if eq_id not in shown and any(c.script == script and resolve(c) in code for c in eq.code):
            places.setdefault(s, []).append((e, eq_id))
    if not places:
        return ""
    parts = []
    for s, found in sorted(places.items()):
        links = ", ".join(f'<a href="{PAGE}#{eq_id}" title="{html.escape(f"{s}. {SECTIONS[s - 1].title}, equation ({s}.{e})")}">'
                          f"({s}.{e})</a>" for e, eq_id in found)
        parts.append(f"§{s} {links}")
    return f'<div class="backlinks">↗ derivation: {" · ".join(parts)}</div>'


def impl_html(codes: list[Code]) -> str:
    """The lines that compute an equation: each text once, highlighted, then where it is, linked."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    groups: dict[str, list[tuple[Code, int]]] = {}
    for code in codes:
        number = resolve(code)
        groups.setdefault(script_lines(code.script)[number - 1].strip(), []).append((code, number))
    rows = []
    for line, places in groups.items():
        shown = highlight(line, PythonLexer(), HtmlFormatter(nowrap=True)).rstrip("\n")
        links = " · ".join(f'<a class="codelink" href="{code.script}.html#line-{number}" '
                           f'title="{code.script}.py, line {number}, in {code.where}">{code.script}.py:{number}</a>'
                           for code, number in places)
        wheres = sorted({code.where for code, _ in places})
        rows.append(f'<div class="line"><pre>{shown}</pre><div class="where">'
                    f'{", ".join(f"<code>{w}</code>" for w in wheres)}: {links}</div></div>')
    return "".join(rows)


def section_html(s: int, section: Section) -> str:
    steps, paragraphs, e = [], [], 0
    for block in section.blocks:
        if isinstance(block, str):
            paragraphs.append(paragraphs_html(block))
            continue
        e += 1
        equation = f'<div class="eqn">{display(block.latex)}<span class="eqno">({s}.{e})</span></div>'
        steps.append(f'<div class="dstep" id="{block.id}"><div class="derivation">{"".join(paragraphs)}{equation}</div>'
                     f'<div class="impl">{impl_html(block.code)}</div></div>')
        paragraphs = []
    if paragraphs:
        steps.append(f'<div class="dstep"><div class="derivation">{"".join(paragraphs)}</div><div></div></div>')
    return f'<section id="{section.id}"><h2>{s}. {html.escape(section.title)}</h2>{"".join(steps)}</section>'


def check() -> None:
    """Stop the build where the two directions disagree: a `# math:` line whose LaTeX is in no
    entry, an entry that no script holds, or a `# math:` line whose section of its script's page
    (the code beside its notes) shares no line with the code links of the place it points to."""
    b = build_module()
    found = equations()
    for eq_id in set(MATH_LINKS.values()):
        if eq_id not in found:
            raise ValueError(f"derivations: MATH_LINKS points to no equation {eq_id}")
    used = set()
    for script in b.SCRIPTS:
        source = (b.ROOT / f"{script}.py").read_text()
        lines = source.split("\n")
        if lines[-1] == "":
            lines.pop()
        doc_end = next(i for i, line in enumerate(lines[1:], 1) if line.strip().endswith('"""'))
        beside = {}  # `# math:` line -> the code lines of its section
        for notes, code, start in b.split_sections(source, lines, doc_end + 2):
            for n in range(start, start + len(notes)):
                beside[n] = set(code)
        for number, latex in math_lines(script):
            eq_id = target(script, number, latex)
            used.add(normalised(latex))
            _, section = section_of(eq_id)
            linked = {resolve(c) for block in section.blocks if isinstance(block, Eq)
                      for c in block.code if c.script == script}
            if not linked & beside.get(number, set()):
                raise ValueError(f"derivations: {script}.py line {number} (`# math: {latex}`) links to {eq_id}, "
                                 f"whose section links none of the code beside it on {script}.html")
    stale = [latex for latex in LINKS if latex not in used]
    if stale:
        raise ValueError(f"derivations: MATH_LINKS entries that no script's `# math:` line holds: {stale}")


NOTATION = ("Notation: $\\pi_\\theta(a|s)$ is the policy, and $\\pi_{\\theta_{old}}$ the one that collected "
            "the batch. Steps are t = 0, …, T − 1. In {sec:pg-theorem}–{sec:baseline} T is an episode's length, "
            "and from {sec:gae} on a rollout's length per env (`--num-steps`). $\\hat{\\mathbb{E}}_t$ is the "
            "average over the B steps of a batch. γ is the discount, λ the GAE parameter, ε the clip range. "
            "$\\delta_t$ is a TD residual, and δ alone the KL bound, except in {eq:eq-running-moments}, where it "
            "is a difference of means. H is the KL's Hessian in {sec:trust-region} and an entropy elsewhere.")


def page() -> str:
    """docs/derivations.html."""
    b = build_module()
    check()
    contents = "".join(f'<li><a href="#{section.id}">{html.escape(section.title)}</a></li>' for section in SECTIONS)
    intro = (
        "<p>Where the equations of the scripts come from, derived in order. The page starts from the policy "
        "gradient of an episode and reward-to-go. It then derives the baseline and the policy-gradient theorem, "
        "generalised advantage estimation, the importance-sampled surrogate, the trust region and the natural "
        "gradient, the clipped surrogate, and the gradient through time of a recurrent policy. The pieces that "
        "belong to the distributions and the data come last.</p>"
        "<p>Beside each equation that a script computes are the lines that compute it, each linked to its line "
        "on the script's page. Each section of a script page that computes an equation links back here. Where "
        "a step of the course brings an idea into the code, the text links to that step's page. Where a fact "
        "comes from a paper, the paper is named, with the number of its equation or section where it has "
        "one.</p>"
        f"<ol>{contents}</ol>"
        f"<p>{text(NOTATION)}</p>")
    body = "".join(section_html(s, section) for s, section in enumerate(SECTIONS, 1))
    references = "".join(f"<li>{html.escape(r)}</li>" for r in REFERENCES)
    nav = '<nav class="pages"><a href="index.html">← all scripts</a><a href="reinforce.html">reinforce.py →</a></nav>'
    content = (f'<div class="derivations"><header><h1>The derivations beside the code</h1><p><a href="index.html">pgref</a>'
               f" · from the policy gradient to the clipped surrogate, each equation linked to the lines that compute it"
               f"</p></header>\n{nav}\n<div class=\"intro\">{intro}</div>\n{body}\n"
               f'<div class="references"><h2>References</h2><ul>{references}</ul></div>\n{nav}</div>')
    from pygments.formatters import HtmlFormatter

    style = CSS + HtmlFormatter(style="default").get_style_defs(".impl pre")
    return b.page("pgref: the derivations", content).replace("</style>", style + "</style>", 1)
