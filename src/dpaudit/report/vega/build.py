"""Rebuild or verify ``dvc_plots.html``: DVC's plots page with the pinned Vega libraries inlined.

    python -m dpaudit.report.vega.build                 # verify the committed files (no network)
    python -m dpaudit.report.vega.build --rebuild       # download the npm tarballs, check, rewrite
    python -m dpaudit.report.vega.build --rebuild --tarballs DIR   # tarballs from `npm pack` in DIR

A rebuild checks the SHA-256 of every tarball, of the ``build/<name>.min.js`` it takes from it and
of its LICENSE before writing anything; the script is inlined byte for byte, so verifying compares
each inlined block with the pinned sum of the upstream file. The versions are those of the CDN tags
of dvc-render's default template (``VegaRenderer.SCRIPTS``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "dvc_plots.html"
REGISTRY = "https://registry.npmjs.org"
#: DVC substitutes these anywhere in the template (the scripts one is left out on purpose: it would
#: add DVC's CDN script tags); the inlined code must not contain any of them.
PLACEHOLDERS = ("{plot_divs}", "{refresh_tag}", "{scripts}")


@dataclass(frozen=True)
class Library:
    """One pinned npm package: where it comes from and the SHA-256 sums of what is taken from it."""

    name: str
    version: str
    tarball_sha256: str
    script_sha256: str
    license_sha256: str

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.tarball}"

    @property
    def script(self) -> str:
        """The member of the tarball that is inlined (what the CDN serves for ``<name>@<version>``)."""
        return f"package/build/{self.name}.min.js"

    @property
    def license_file(self) -> Path:
        return HERE / f"LICENSE-{self.name}"

    @property
    def tag(self) -> str:
        return f"{self.name}@{self.version}"


#: In load order: Vega-Lite needs the ``vega`` global, Vega-Embed both.
LIBRARIES = (
    Library(
        "vega",
        "5.20.2",
        "d77deab01d6104b1239228720721f93003e60797d2faced7ffdd759fa70f989d",
        "4794d0169cb1f3ebad8117fe98ba5bd652dd725905ec0384e832391dbccb03be",
        "0af895a1dac4df349658e87c9605638d5b79f86bc8533dfb8e43a05c18dca92d",
    ),
    Library(
        "vega-lite",
        "5.2.0",
        "f64ca4745f043447ac86b67dc9e9592ec2b85ac8b8dafc35faf970f142463e4b",
        "d73157451b3978015ab31dacd55ff90d986ab8663fc0abed50f97b3cd90002cb",
        "f618900fd0d64046963b29f40590cdd1e341a2f41449f99110d82fd81fea808c",
    ),
    Library(
        "vega-embed",
        "6.18.2",
        "93aeee312e92077b0252ef026c0fe0ec8fa430c19825aeada6cd3a6804e68e1b",
        "1ba9826431ddc9805e815ad92acc811c819f2bfd32bda2a128b8c4b5070fab5e",
        "32df67148f0fc3db0eb9e263a7b75d07f1eb14c61955005a4a39c6918d10d137",
    ),
)

_HEAD = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>DVC Plot</title>
    <!-- Vega, Vega-Lite and Vega-Embed are inlined so that the page draws without network; DVC's
         script tags (which load them from a CDN) are left out. Sources, versions and licences:
         README.md beside this template; rebuilt by `python -m dpaudit.report.vega.build`. -->
"""
_SCRIPT = '    <!-- {tag}, BSD-3-Clause: {member} of {url} -->\n    <script data-vendored="{tag}">'
_TAIL = """</script>
"""
_FOOT = """    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""
_BLOCK = re.compile(r'<script data-vendored="([^"]+)">(.*?)</script>', re.S)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def page(scripts: dict[str, str]) -> str:
    """The template text with ``scripts`` (library tag → minified code) inlined in load order."""
    parts = [_HEAD]
    for library in LIBRARIES:
        member = library.script.removeprefix("package/")
        opening = _SCRIPT.format(tag=library.tag, member=member, url=library.url)
        parts += [opening, scripts[library.tag], _TAIL]
    return "".join([*parts, _FOOT])


def inlined(text: str) -> dict[str, str]:
    """The vendored script blocks of a template: library tag → code."""
    return {tag: code for tag, code in _BLOCK.findall(text)}


def _unsafe(code: str) -> list[str]:
    """What in ``code`` would break once it sits inside ``<script>`` in a template DVC fills in."""
    problems = [f"contains {p}" for p in PLACEHOLDERS if p in code]
    return problems + [f"contains {s}" for s in ("</script", "<!--") if s in code.lower()]


def verify(template: Path = TEMPLATE) -> list[str]:
    """Offline check of the committed template and licences against the pinned sums; problems found."""
    if not template.is_file():
        return [f"{template.name} is missing"]
    text = template.read_text(encoding="utf-8")
    scripts = inlined(text)
    problems = []
    if list(scripts) != [library.tag for library in LIBRARIES]:
        problems.append(f"inlined libraries are {list(scripts)}, not {[lib.tag for lib in LIBRARIES]}")
    for library in LIBRARIES:
        code = scripts.get(library.tag, "")
        if _sha256(code.encode("utf-8")) != library.script_sha256:
            problems.append(f"{library.tag}: inlined code differs from {library.script} of {library.url}")
        problems += [f"{library.tag}: {p}" for p in _unsafe(code)]
        license_file = library.license_file
        if not license_file.is_file() or _sha256(license_file.read_bytes()) != library.license_sha256:
            problems.append(f"{license_file.name} is missing or differs from the package's LICENSE")
    if not problems and text != page(scripts):
        problems.append(f"{template.name} differs from what the build writes (rebuild it)")
    return problems


def _tarball(library: Library, folder: Path | None) -> bytes:
    """The package tarball, from ``folder`` (as ``npm pack`` names it) or the npm registry."""
    if folder is not None:
        return (folder / library.tarball).read_bytes()
    with urllib.request.urlopen(library.url, timeout=60) as response:
        return response.read()


def _checked(data: bytes, expected: str, what: str) -> bytes:
    """``data`` when its SHA-256 is ``expected``; a ValueError naming ``what`` otherwise."""
    if _sha256(data) != expected:
        raise ValueError(f"{what} has SHA-256 {_sha256(data)}, pinned {expected}")
    return data


def _member(archive: tarfile.TarFile, name: str, expected: str, source: str) -> bytes:
    handle = archive.extractfile(name)
    if handle is None:
        raise ValueError(f"{source} has no file {name}")
    return _checked(handle.read(), expected, f"{name} of {source}")


def rebuild(folder: Path | None = None, template: Path = TEMPLATE) -> None:
    """Fetch and check every tarball, then write the template and the licence texts."""
    scripts: dict[str, str] = {}
    licenses: dict[Path, bytes] = {}
    for library in LIBRARIES:
        data = _checked(_tarball(library, folder), library.tarball_sha256, library.tarball)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            code = _member(archive, library.script, library.script_sha256, library.tarball).decode("utf-8")
            licenses[library.license_file] = _member(
                archive, "package/LICENSE", library.license_sha256, library.tarball
            )
        if problems := _unsafe(code):
            raise ValueError(f"{library.script} of {library.tarball} cannot be inlined: {problems}")
        scripts[library.tag] = code
    for path, text in licenses.items():
        path.write_bytes(text)
    template.write_text(page(scripts), encoding="utf-8", newline="\n")


def main(argv: list[str] | None = None) -> int:
    """Verify (default) or ``--rebuild`` the template; exit status 1 when verification fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="rewrite the template from the tarballs")
    parser.add_argument("--tarballs", type=Path, help="folder of <name>-<version>.tgz (default: download)")
    args = parser.parse_args(argv)
    if args.rebuild:
        rebuild(args.tarballs)
    problems = verify()
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        size = TEMPLATE.stat().st_size
        print(f"{TEMPLATE.name}: {', '.join(lib.tag for lib in LIBRARIES)} verified ({size} bytes)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
