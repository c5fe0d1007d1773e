"""Dataset registry, download, parsing and preparation.

- :mod:`dpaudit.data.registry`: datasets, their official files, URLs and integrity facts.
- :mod:`dpaudit.data.download`: ``download_dataset`` (mirror, vendored copy or network; verified, atomic).
- :mod:`dpaudit.data.parsers`: official file formats → features and labels.
- :mod:`dpaudit.data.prepare`: ``DataConfig`` (params section ``data``) and ``prepare_dataset``.
- :mod:`dpaudit.data.custom`: the user's own DVC-tracked CSV/Parquet/NPZ file (``prepare_custom``).
- :mod:`dpaudit.data.prepared`: ``PreparedData``, the schema every later stage reads.
- :mod:`dpaudit.data.worlds`: what records each trial trains on (worlds D / D′) and per-setting seeds.
"""
