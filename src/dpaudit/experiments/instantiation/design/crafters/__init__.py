"""The crafters of Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`, Table I), one module per kind
of insertion, each with the ``play_*`` functions of the threat models that use it:

- :mod:`.record`: Crafter 1, a population record (A);
- :mod:`.poison`: Crafters 2 and 3, a crafted input fixed for all trials (B, C) or re-crafted at every
  step (D);
- :mod:`.canary`: Crafters 4 and 5, a gradient canary on a trained model (E) or on a malicious
  dataset with learning rate 0 (F).

Every ``play_*`` function plays one cell of the game: all 2N trials of one threat model and one noise
multiplier train at once through the shared DP-SGD trainer (:mod:`dpaudit.training.dpsgd`), and it
returns the view of the threat model as arrays with a trial axis (``inserted`` = 1 in world D′).
Which threat model uses which is :mod:`..registry`'s table.
"""
