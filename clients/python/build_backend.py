"""The build backend of vlc-client (PEP 517, and PEP 660 for editable
installs): standard library only, so that `pip install` needs no package
index, not even for setuptools.

It reads the [project] table of pyproject.toml (with tomllib, or on
Python before 3.11 with `read_toml`, which knows only the subset that
file uses) and writes a pure-Python wheel of the package vlc_client, an
sdist, or an editable wheel (a .pth file naming this folder).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE = "vlc_client"
# Fixed times in archives: the same sources give the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
SDIST_FILES = ["pyproject.toml", "README.md", "build_backend.py", "example.py"]


def read_toml(text: str) -> Dict[str, Any]:
    """The subset of TOML that pyproject.toml uses: [table] and
    [dotted.table] headers, and key = value where value is a "string"
    without escapes, an array of such strings on one line, or true/false;
    comments on lines of their own."""
    root: Dict[str, Any] = {}
    table = root
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
        if m:
            table = root
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        m = re.fullmatch(r'([A-Za-z0-9_-]+|"[^"]*")\s*=\s*(.*)', line)
        if not m:
            raise ValueError(f"pyproject.toml:{n}: not understood: {raw!r}")
        key, value = m.group(1).strip('"'), m.group(2)
        if value in ("true", "false"):
            table[key] = value == "true"
        elif re.fullmatch(r'"[^"\\]*"', value):
            table[key] = value[1:-1]
        elif re.fullmatch(r'\[\s*("[^"\\]*"\s*,\s*)*("[^"\\]*"\s*)?,?\s*\]', value):
            table[key] = re.findall(r'"([^"\\]*)"', value)
        else:
            raise ValueError(f"pyproject.toml:{n}: value not understood: {value!r}")
    return root


def project() -> Dict[str, Any]:
    """The [project] table of pyproject.toml."""
    text = (HERE / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        return read_toml(text)["project"]
    return tomllib.loads(text)["project"]


def _names(p: Dict[str, Any]) -> Tuple[str, str]:
    """The distribution's file name part (PEP 427: - and . as _) and version."""
    return re.sub(r"[-_.]+", "_", p["name"]), p["version"]


def metadata(p: Dict[str, Any]) -> str:
    """Core metadata (version 2.1) of the [project] table p."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
    ]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    for label, url in p.get("urls", {}).items():
        lines.append(f"Project-URL: {label}, {url}")
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            lines.append(f'Requires-Dist: {dep}; extra == "{extra}"')
    text = "\n".join(lines) + "\n"
    if "readme" in p:
        text += "Description-Content-Type: text/markdown\n\n" + (HERE / p["readme"]).read_text(encoding="utf-8")
    return text


def _package_files() -> List[Path]:
    return sorted(f for f in (HERE / PACKAGE).rglob("*") if f.is_file() and "__pycache__" not in f.parts)


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    """Write a py3-none-any wheel holding files and its .dist-info."""
    p = project()
    name, version = _names(p)
    info = f"{name}-{version}.dist-info"
    files = files + [
        (f"{info}/METADATA", metadata(p).encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: vlc-client build_backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = io.StringIO()
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{path},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files.append((f"{info}/RECORD", record.getvalue().encode()))
    wheel = f"{name}-{version}-py3-none-any.whl"
    tmp = Path(directory) / (wheel + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, ZIP_TIME)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, Path(directory) / wheel)
    return wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    """PEP 517: the wheel of vlc_client, in wheel_directory; its file name."""
    return _write_wheel(wheel_directory, [(f.relative_to(HERE).as_posix(), f.read_bytes()) for f in _package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a wheel whose .pth file puts this folder on sys.path, so
    that the installed package is the one being edited."""
    return _write_wheel(wheel_directory, [(f"{PACKAGE}.pth", (str(HERE) + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    """PEP 517: a source archive (what pip installs from) with PKG-INFO."""
    p = project()
    name, version = _names(p)
    top = f"{name}-{version}"
    sdist = f"{top}.tar.gz"
    tmp = Path(sdist_directory) / (sdist + ".tmp")
    files = [(f, (HERE / f).read_bytes()) for f in SDIST_FILES]
    files += [(f.relative_to(HERE).as_posix(), f.read_bytes()) for f in _package_files()]
    files.append(("PKG-INFO", metadata(p).encode()))
    with open(tmp, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, data in files:
            ti = tarfile.TarInfo(f"{top}/{path}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    os.replace(tmp, Path(sdist_directory) / sdist)
    return sdist
