"""dpaudit: audit differentially private machine learning.

Accountants' ε upper bounds, attack-based ε lower bounds with confidence intervals and
identifiability scores, side by side, in one DVC pipeline.
"""

import os

# TensorFlow's C++ start-up chatter (CUDA plug-in registration on CPU-only machines) drowns the
# pipeline's own log; set before any module imports TensorFlow. Users may override it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

__version__ = "0.1.0"
