"""Write tests/data/rliable_reference.json: rliable's own values on fixed inputs, which
tests/test_benchmarks.py holds benchmarks/stats.py to. rliable is not a dependency of the project,
so this runs once, in a venv of its own:

    python -m venv /tmp/rliable && /tmp/rliable/bin/pip install rliable "pandas<3"
    /tmp/rliable/bin/python tests/make_rliable_reference.py

Each case is one program against another on one env, the shape the side-by-side suite compares:
(runs, 1) score matrices, intervals from rliable's stratified bootstrap (percentile, 50,000 reps),
the profile's band included.
"""

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from rliable import library, metrics

rng = np.random.default_rng(59)
CASES = {
    "ten seeds each, with a tie": (np.append(rng.normal(2900, 1200, 9).round(1), 1598.4),
                                   np.append(rng.normal(1600, 400, 9).round(1), 1598.4)),
    "eight against nine, overlapping": (rng.normal(2090, 470, 8).round(1), rng.normal(2140, 370, 9).round(1)),
    "one run each": (np.array([3.0]), np.array([2.0])),
    "the same runs": (np.array([1.0, 5.0, 9.0]), np.array([1.0, 5.0, 9.0])),
}
TAUS = [float(t) for t in np.linspace(0, 5000, 11)]


def interval(x, y, func):
    _, ci = library.get_interval_estimates({"c": [x[:, None], y[:, None]]}, lambda a, b: np.array([func(a, b)]),
                                           reps=50_000, random_state=np.random.RandomState(0))
    return [float(v) for v in ci["c"].ravel()]


out = {"rliable": version("rliable"), "taus": TAUS, "cases": {}}
for name, (x, y) in CASES.items():
    profile, band = library.create_performance_profile({"x": x[:, None]}, TAUS, reps=50_000)
    out["cases"][name] = {
        "x": x.tolist(), "y": y.tolist(),
        "iqm_x": float(metrics.aggregate_iqm(x[:, None])),
        "probability_of_improvement": float(metrics.probability_of_improvement(x[:, None], y[:, None])),
        "probability_of_improvement_interval": interval(x, y, metrics.probability_of_improvement),
        "difference_of_means_interval": interval(x, y, lambda a, b: a.mean() - b.mean()),
        "profile_x": [float(v) for v in profile["x"]],
        "profile_x_interval": band["x"].tolist(),
    }
path = Path(__file__).parent / "data" / "rliable_reference.json"
path.write_text(json.dumps(out, indent=1) + "\n")
print(f"wrote {path}")
