"""Tests of the package's build (build_backend.py): the wheel it writes,
and a real `pip install --no-index` into a fresh virtual environment,
which needs no package index at all (no setuptools from one). No server.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PKG = HERE.parent  # clients/python
sys.path.insert(0, str(PKG))

import build_backend  # noqa: E402
import vlc_client  # noqa: E402


class BackendTest(unittest.TestCase):
    def test_read_toml_is_tomllib(self):
        text = (PKG / "pyproject.toml").read_text()
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib (Python < 3.11) to compare with")
        self.assertEqual(build_backend.read_toml(text), tomllib.loads(text))
        with self.assertRaisesRegex(ValueError, "pyproject.toml:2: value not understood"):
            build_backend.read_toml('[a]\nb = {c = 1}\n')

    def test_wheel(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = build_backend.build_wheel(tmp)
            self.assertEqual(name, f"vlc_client-{vlc_client.__version__}-py3-none-any.whl")
            with zipfile.ZipFile(Path(tmp) / name) as z:
                names = z.namelist()
                info = f"vlc_client-{vlc_client.__version__}.dist-info"
                self.assertEqual(sorted(names), sorted(["vlc_client/__init__.py", f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD"]))
                self.assertEqual(z.read("vlc_client/__init__.py"), (PKG / "vlc_client" / "__init__.py").read_bytes())
                # RECORD: every other file with its sha256 and size.
                record = z.read(f"{info}/RECORD").decode().splitlines()
                self.assertEqual(record[-1], f"{info}/RECORD,,")
                for line in record[:-1]:
                    path, digest, size = line.split(",")
                    data = z.read(path)
                    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (f"sha256={want}", len(data)), path)
                self.assertEqual(len(record) - 1, len(names) - 1)
                meta = z.read(f"{info}/METADATA").decode()
                for want in ("Metadata-Version: 2.1\n", "Name: vlc-client\n", f"Version: {vlc_client.__version__}\n",
                             "Requires-Python: >=3.8\n", "Provides-Extra: numpy\n", 'Requires-Dist: numpy; extra == "numpy"\n',
                             "\n\n# vlc-client\n"):
                    self.assertIn(want, meta)
            # The same sources, the same bytes.
            first = (Path(tmp) / name).read_bytes()
            build_backend.build_wheel(tmp)
            self.assertEqual((Path(tmp) / name).read_bytes(), first)


class InstallTest(unittest.TestCase):
    def venv(self, tmp: Path) -> Path:
        """A fresh virtual environment without this Python's packages (so
        no setuptools either, unless venv puts one in), with pip."""
        venv = tmp / "venv"
        p = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if p.returncode != 0:
            self.skipTest(f"no virtual environment with pip here ({sys.executable} -m venv: {p.stderr.strip()[-200:]})")
        return venv / "bin" / "python"

    def test_pip_install_no_index(self):
        # The package is copied first so that the build leaves nothing in
        # the source tree; PIP_FIND_LINKS and the like are left out.
        with tempfile.TemporaryDirectory(prefix="vlc-client-venv-") as tmp:
            tmp = Path(tmp)
            src = tmp / "src"
            shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "dist", "*.egg-info"))
            py = self.venv(tmp)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
            for args in (["--no-index", str(src)], ["--no-index", "--force-reinstall", "-e", str(src)]):
                p = subprocess.run([str(py), "-m", "pip", "install", "--isolated", *args], capture_output=True, text=True, env=env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                p = subprocess.run([str(py), "-c", "import vlc_client; print(vlc_client.__file__, vlc_client.__version__)"],
                                   capture_output=True, text=True, cwd=tmp, env=env)
                self.assertEqual(p.returncode, 0, p.stderr)
                path, version = p.stdout.split()
                want = src / "vlc_client" / "__init__.py" if "-e" in args else py.parent.parent
                self.assertTrue(str(Path(path).resolve()).startswith(str(want.resolve())), (args, path))
                self.assertEqual(version, vlc_client.__version__)
            self.assertEqual(sorted(p.name for p in src.iterdir()),
                             sorted(p.name for p in PKG.iterdir() if p.name not in ("tests", "__pycache__", "build", "dist")
                                    and not p.name.endswith(".egg-info")))


if __name__ == "__main__":
    unittest.main()
