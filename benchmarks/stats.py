"""Statistics for comparing two programs over seeds, as Agarwal et al. (2021), "Deep RL at the edge
of the statistical precipice" (NeurIPS), recommend and their library rliable computes: the
interquartile mean, intervals from a stratified bootstrap, the probability of improvement and the
performance profile. Written out here (numpy only) so that report.py needs no extra package.

Stratified bootstrap: each program's runs on one env are one stratum. A bootstrap sample redraws,
with replacement, as many runs as each stratum has, from that stratum alone, so that the sample
keeps the design (n seeds of each program). The interval is the percentile interval of the
statistic over the samples.
"""

import numpy as np


def iqm(scores) -> float:
    """The interquartile mean: the mean of the scores left after a quarter of them is cut from
    each end (floor(n/4) each side, as scipy.stats.trim_mean with proportiontocut 0.25)."""
    x = np.sort(np.asarray(scores, dtype=float))
    cut = int(0.25 * len(x))
    return float(x[cut:len(x) - cut].mean())


def probability_of_improvement(x, y) -> float:
    """P(X > Y): the chance that a run of program X ends above a run of program Y, over all pairs,
    a tie counting one half (the Mann-Whitney U statistic over n·m)."""
    x, y = np.asarray(x, dtype=float)[:, None], np.asarray(y, dtype=float)[None, :]
    return float(((x > y) + 0.5 * (x == y)).mean())


def redraw(rng, x: np.ndarray) -> np.ndarray:
    """A bootstrap sample of x: len(x) of its values, drawn with replacement."""
    return x[rng.integers(0, len(x), len(x))]


def percentile_interval(values, level: float, **kwargs):
    """(low, high): the percentiles of values that leave (1 - level) / 2 out at each end."""
    tail = (1 - level) / 2 * 100
    return np.percentile(values, [tail, 100 - tail], **kwargs)


def bootstrap_interval(x, y, statistic, reps: int = 10_000, level: float = 0.95, seed: int = 0):
    """(low, high): the percentile interval of statistic(x*, y*) over stratified bootstrap
    samples, x* redrawn from x and y* from y, each to its own size."""
    rng = np.random.default_rng(seed)
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    low, high = percentile_interval([statistic(redraw(rng, x), redraw(rng, y)) for _ in range(reps)], level)
    return float(low), float(high)


def median_interval(x, reps: int = 10_000, level: float = 0.95, seed: int = 0):
    """(low, high): the percentile interval of the median of x over bootstrap samples of x.
    x may hold inf (a run that never reaches a target). The ends are picked from the samples'
    medians (the "nearest" percentile), never interpolated between them: numpy's interpolation
    next to an inf gives nan. A median of values that hold +inf is inf or finite. So an end may
    be inf, but never nan."""
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=float)
    medians = np.median(x[rng.integers(0, len(x), (reps, len(x)))], axis=1)  # reps samples at once
    low, high = percentile_interval(medians, level, method="nearest")
    return float(low), float(high)


def difference_of_means(x, y) -> float:
    return float(np.mean(x) - np.mean(y))


def verdict(low: float, high: float, no_difference: float = 0.0) -> str:
    """"higher", "lower" or "cannot tell apart": whether the interval excludes no_difference."""
    return "higher" if low > no_difference else "lower" if high < no_difference else "cannot tell apart"


def steps_to(steps, returns, target: float, window: int = 20) -> float:
    """The first step at which the mean return of the last `window` finished episodes reaches
    target; inf where it never does."""
    returns = np.asarray(returns, dtype=float)
    for i in range(window - 1, len(returns)):
        if returns[i - window + 1:i + 1].mean() >= target:
            return float(steps[i])
    return float("inf")


def performance_profile(scores, taus) -> np.ndarray:
    """The fraction of runs whose score is above each tau (the run-score distribution)."""
    scores = np.asarray(scores, dtype=float)
    return np.array([(scores > tau).mean() for tau in taus])


def profile_interval(strata, taus, reps: int = 2_000, level: float = 0.95, seed: int = 0):
    """(low, high): the pointwise percentile interval of the performance profile over stratified
    bootstrap samples. strata holds one array of scores per env, and a sample redraws each env's
    runs from that env alone, as rliable's create_performance_profile does. rliable requires as
    many runs in each env. With unequal counts, this weights each env by its runs."""
    rng = np.random.default_rng(seed)
    strata = [np.asarray(s, dtype=float) for s in strata]
    profiles = [performance_profile(np.concatenate([redraw(rng, s) for s in strata]), taus) for _ in range(reps)]
    low, high = percentile_interval(profiles, level, axis=0)
    return low, high
