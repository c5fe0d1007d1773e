"""Attacks: the DI adversary, loss-threshold membership, LiRA and gradient canaries (one module each)."""
