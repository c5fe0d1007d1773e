"""Dataset registry, download, parsing and preparation."""
