"""Vega, Vega-Lite and Vega-Embed, pinned and inlined into the HTML template of ``dvc plots``.

``dvc_plots.html`` (named by ``plots.html_template`` in ``.dvc/config``) carries the three
libraries inline so that ``dvc plots show`` and ``dvc plots diff`` draw without network.
:mod:`.build` rebuilds it from the npm tarballs and verifies it; README.md names the sources.
Nothing in the pipeline imports this package.
"""
