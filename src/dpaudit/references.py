"""Bibliography: the papers dpaudit implements. Docstrings cite them as ``references.<KEY>``.

Each entry gives title, authors, venue, year and arXiv id, so that an equation cited in a
docstring (e.g. "Bernau et al. Eq. 10") can be found without guessing which version is meant.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPER_RESULTS", "REFERENCES", "PaperResult", "Reference"]


@dataclass(frozen=True)
class Reference:
    """One paper: who, what, where, when, and its arXiv identifier."""

    key: str
    title: str
    authors: str
    venue: str
    year: int
    arxiv: str

    @property
    def url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv}"

    def cite(self) -> str:
        return f"{self.authors} ({self.year}). {self.title}. {self.venue}. arXiv:{self.arxiv}"


BERNAU = Reference(
    "BERNAU",
    "Quantifying identifiability to choose and audit ε in differentially private deep learning",
    "Daniel Bernau, Günther Eibl, Philip W. Grassal, Hannah Keller, Florian Kerschbaum",
    "Proceedings of the VLDB Endowment 14(13)",
    2021,
    "2103.02913",
)
ERLINGSSON = Reference(
    "ERLINGSSON",
    "That which we call private",
    "Úlfar Erlingsson, Ilya Mironov, Ananth Raghunathan, Shuang Song",
    "arXiv preprint",
    2019,
    "1908.03566",
)
NEGOESCU = Reference(
    "NEGOESCU",
    "Epsilon*: Privacy metric for machine learning models",
    "Diana M. Negoescu, Humberto Gonzalez, Saad Eddin Al Orjany, Jilei Yang, Yuliia Lut, Rahul Tandra, "
    "Xiaowen Zhang, Xinyi Zheng, Zach Douglas, Vidita Nolkha, Parvez Ahammad, Gennady Samorodnitsky",
    "arXiv preprint",
    2023,
    "2307.11280",
)
NASR_2021 = Reference(
    "NASR_2021",
    "Adversary instantiation: lower bounds for differentially private machine learning",
    "Milad Nasr, Shuang Song, Abhradeep Thakurta, Nicolas Papernot, Nicholas Carlini",
    "IEEE Symposium on Security and Privacy (S&P)",
    2021,
    "2101.04535",
)
AERNI = Reference(
    "AERNI",
    "Evaluations of machine learning privacy defenses are misleading",
    "Michael Aerni, Jie Zhang, Florian Tramèr",
    "ACM Conference on Computer and Communications Security (CCS)",
    2024,
    "2404.17399",
)
NASR_2023 = Reference(
    "NASR_2023",
    "Tight auditing of differentially private machine learning",
    "Milad Nasr, Jamie Hayes, Thomas Steinke, Borja Balle, Florian Tramèr, Matthew Jagielski, "
    "Nicholas Carlini, Andreas Terzis",
    "USENIX Security Symposium",
    2023,
    "2302.07956",
)
STEINKE_NASR_JAGIELSKI = Reference(
    "STEINKE_NASR_JAGIELSKI",
    "Privacy auditing with one (1) training run",
    "Thomas Steinke, Milad Nasr, Matthew Jagielski",
    "Advances in Neural Information Processing Systems (NeurIPS)",
    2023,
    "2305.08846",
)
ABADI = Reference(
    "ABADI",
    "Deep learning with differential privacy",
    "Martín Abadi, Andy Chu, Ian Goodfellow, H. Brendan McMahan, Ilya Mironov, Kunal Talwar, Li Zhang",
    "ACM Conference on Computer and Communications Security (CCS)",
    2016,
    "1607.00133",
)
KAIROUZ = Reference(
    "KAIROUZ",
    "The composition theorem for differential privacy",
    "Peter Kairouz, Sewoong Oh, Pramod Viswanath",
    "International Conference on Machine Learning (ICML)",
    2015,
    "1311.0776",
)
YEOM = Reference(
    "YEOM",
    "Privacy risk in machine learning: analyzing the connection to overfitting",
    "Samuel Yeom, Irene Giacomelli, Matt Fredrikson, Somesh Jha",
    "IEEE Computer Security Foundations Symposium (CSF)",
    2018,
    "1709.01604",
)
DONG_ROTH_SU = Reference(
    "DONG_ROTH_SU",
    "Gaussian differential privacy",
    "Jinshuo Dong, Aaron Roth, Weijie J. Su",
    "Journal of the Royal Statistical Society Series B",
    2022,
    "1905.02383",
)

#: Every reference by key.
REFERENCES: dict[str, Reference] = {
    r.key: r
    for r in (
        BERNAU,
        ERLINGSSON,
        NEGOESCU,
        NASR_2021,
        AERNI,
        NASR_2023,
        STEINKE_NASR_JAGIELSKI,
        ABADI,
        KAIROUZ,
        YEOM,
        DONG_ROTH_SU,
    )
}


@dataclass(frozen=True)
class PaperResult:
    """One headline number of a paper, as the paper states it, for the fidelity table.

    ``value`` is the paper's number (None where the paper states a claim but no number that the
    texts dpaudit works from give); ``estimator`` how the paper measured it; ``setting`` the paper's
    dataset, ε and trial count; ``where`` the section, table or figure.
    """

    key: str
    paper: str
    where: str
    claim: str
    value: float | None
    estimator: str
    setting: str


#: The papers' headline results that dpaudit sets out to reproduce (the fidelity table's rows).
PAPER_RESULTS: tuple[PaperResult, ...] = (
    PaperResult(
        "nasr-cp-cap",
        "NASR_2021",
        "§III-C",
        "largest ε_LB that 1000 trials can certify",
        5.60,
        "Clopper–Pearson, 95 %, all trials correct",
        "1000 trials, δ = 1e-5",
    ),
    PaperResult(
        "nasr-a",
        "NASR_2021",
        "§IV-A",
        "API access (A): ε_LB at ε = 4",
        0.31,
        "Eq. 5 sweep (Clopper–Pearson)",
        "CIFAR-10, TPR 0.017 at FPR 0.002, 1000 trials",
    ),
    PaperResult(
        "nasr-c",
        "NASR_2021",
        "§IV-C",
        "intermediate models (C): ε_LB at ε = 2",
        0.25,
        "Eq. 5 sweep (Clopper–Pearson)",
        "Purchase-100, 1000 trials",
    ),
    PaperResult(
        "nasr-d",
        "NASR_2021",
        "§IV-D",
        "adaptive poison (D): ε_LB at ε = 2",
        0.37,
        "Eq. 5 sweep (Clopper–Pearson)",
        "Purchase-100, 1000 trials",
    ),
    PaperResult(
        "nasr-d-minus-c",
        "NASR_2021",
        "§IV-D",
        "adaptive poison beats intermediate models: D − C",
        0.12,
        "difference of Eq. 5 sweeps",
        "Purchase-100, ε = 2",
    ),
    PaperResult(
        "nasr-e",
        "NASR_2021",
        "§IV-E, Fig. 7",
        "gradient canary (E): ε_LB at ε = 1",
        0.3,
        "Eq. 5 sweep, Distinguisher 3",
        "MNIST, natural data, 1000 trials",
    ),
    PaperResult(
        "nasr-f",
        "NASR_2021",
        "§IV-F, Fig. 7",
        "malicious dataset (F): ε_LB at ε = 4",
        3.6,
        "Eq. 5 sweep, Distinguisher 3",
        "MNIST, q = 256/60000, 60 epochs, 10⁶ runs (App. A)",
    ),
    PaperResult(
        "bernau-adv-ls-bounded",
        "BERNAU",
        "Table 2",
        "Adv^DI,Gau, adult, LS, bounded, ρβ = 0.9",
        0.17,
        "empirical advantage of the DI adversary",
        "adult, 30 full-batch epochs, C = 3",
    ),
    PaperResult(
        "bernau-adv-ls-unbounded",
        "BERNAU",
        "Table 2",
        "Adv^DI,Gau, adult, LS, unbounded, ρβ = 0.9",
        0.22,
        "empirical advantage of the DI adversary",
        "adult, 30 full-batch epochs, C = 3",
    ),
    PaperResult(
        "bernau-rho-alpha",
        "BERNAU",
        "Table 2 (f)",
        "ρα at ρβ = 0.9, adult (δ = 0.001)",
        0.23,
        "closed form, Thm. 2",
        "ε = 2.2, δ = 0.001",
    ),
    PaperResult(
        "bernau-delta-prime",
        "BERNAU",
        "Table 2",
        "δ′ (beliefs above ρβ), adult, LS, bounded",
        0.0,
        "share of trials whose belief exceeds ρβ",
        "adult, ρβ = 0.9",
    ),
    PaperResult(
        "bernau-candidates",
        "BERNAU",
        "§6.1, Fig. 4",
        "top dataset-sensitivity candidates have larger LS than bottom ones (1 = yes)",
        1.0,
        "250 repetitions per candidate",
        "adult, Manhattan distance, ρβ = 0.9",
    ),
    PaperResult(
        "erlingsson-tpr-weak-noise",
        "ERLINGSSON",
        "Table 1",
        "attack TPR at 5 % FPR, weakest noise",
        0.089,
        "loss-threshold attack (Yeom et al.)",
        "Purchase-100, noise 0.44×",
    ),
    PaperResult(
        "erlingsson-tpr-strong-noise",
        "ERLINGSSON",
        "Table 1",
        "attack TPR at 5 % FPR, strongest noise",
        0.05,
        "loss-threshold attack (Yeom et al.)",
        "Purchase-100, noise 136.67×",
    ),
    PaperResult(
        "erlingsson-trend",
        "ERLINGSSON",
        "Table 1",
        "Spearman correlation of attack TPR with the noise multiplier",
        -1.0,
        "rank correlation over the table's five noise levels",
        "Purchase-100",
    ),
    PaperResult(
        "negoescu-adult-max",
        "NEGOESCU",
        "§5, Fig. 2",
        "largest Epsilon* of any adult model (all < 0.3)",
        0.3,
        "Epsilon* (parametric), averaged over repeats",
        "adult, DP and non-DP models",
    ),
    PaperResult(
        "aerni-underestimate",
        "AERNI",
        "§1, §5",
        "factor by which a population-level evaluation underestimates leakage (up to)",
        50.0,
        "TPR at low FPR, most vulnerable canaries / population",
        "CIFAR-10, defences at ≥ 88 % accuracy",
    ),
    PaperResult(
        "aerni-heuristics-leak",
        "AERNI",
        "§1, §5",
        "share of the heuristic defences that leak far more on their most vulnerable samples, under "
        "adaptive attacks, than their own population-level evaluation shows (all five)",
        1.0,
        "TPR at low FPR: adaptive attacks on canaries vs the defence's published attack",
        "CIFAR-10, five heuristic defences tuned to ≥ 88 % accuracy",
    ),
    PaperResult(
        "aerni-dp-baseline",
        "AERNI",
        "§1, §5",
        "share of the heuristic defences that beat DP-SGD at similar accuracy (none)",
        0.0,
        "TPR at low FPR on the most vulnerable samples, at matched test accuracy",
        "CIFAR-10, utility-first DP-SGD (ε far above 1000) against five heuristics",
    ),
    PaperResult(
        "steinke-one-run",
        "STEINKE_NASR_JAGIELSKI",
        "§7, Fig. 2",
        "one-run ε_LB reaches most of ε with m = 1000 white-box canaries",
        None,
        "Steinke et al. Thm. 3.1 (one run)",
        "CIFAR-10 WRN, white-box gradient canaries",
    ),
)
