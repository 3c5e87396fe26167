"""The injection's decision, fitted: written by `bench/fit_decision.py`; do not edit by hand.

Fitted on fixtures, probe, locomo-30, cmrc and small directories dealt from them.
`THRESHOLD` adds at most 2.5% false injection to any of them in either language;
`VETO` turns away at most 2% of the on-topic messages the gates pass.
Features: cover, matched, informative, plain, unheld, gated, size, in that order.
"""

MEAN = (0.433418, 2.64075, 1.51021, 0.555289, 1.16364, 0.401342, 4.53047)
SCALE = (0.341883, 2.46383, 2.00116, 0.25446, 1.22409, 0.49017, 1.33384)
WEIGHT = (0.254493, 3.78541, 1.43682, 0.210163, -0.385181, 0.343372, -0.370113)
BIAS = 1.69073
THRESHOLD = 0.84  # for a message the gates pass nothing for
VETO = 0.39  # for one they pass
