"""The injection's decision, fitted: written by `bench/fit_decision.py`; do not edit by hand.

Fitted on fixtures, probe, locomo-30, cmrc and small directories dealt from them.
`THRESHOLD` adds at most 2.5% false injection to any of them in either language;
`VETO` turns away at most 2% of the on-topic messages the gates pass.
Features: cover, matched, informative, plain, translated, unheld, gated, size, in that order.
"""

MEAN = (0.425083, 2.54457, 1.46811, 0.51761, 0.0962545, 1.11341, 0.395204, 4.52932)
SCALE = (0.345595, 2.53012, 2.01533, 0.283734, 0.331755, 1.19858, 0.488895, 1.33554)
WEIGHT = (0.237856, 4.22666, 1.45678, 0.283853, 0.799278, -0.50126, 0.311068, -0.382176)
BIAS = 1.82546
THRESHOLD = 0.86  # for a message the gates pass nothing for
VETO = 0.40  # for one they pass
