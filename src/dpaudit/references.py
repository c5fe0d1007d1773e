"""Bibliography: the papers dpaudit implements. Docstrings cite them as ``references.<KEY>``.

Each entry gives title, authors, venue, year and arXiv id, so that an equation cited in a
docstring (e.g. "Bernau et al. Eq. 10") can be found without guessing which version is meant.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REFERENCES", "Reference"]


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
