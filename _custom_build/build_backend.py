"""The package's build backend: setuptools' own, plus the model registry from the repository's top.

models.toml sits at the top of the checkout beside pyproject.toml (where a reader looks for what
the project ships), while an installed wheel has no checkout: the registry must travel inside the
package, as specllama/models/models.toml, read with importlib.resources. setuptools takes package
data only from inside a package, so the build copies the file there itself (`BuildPy`), and an
sdist carries it and this file (`Sdist`), so a wheel built from the sdist has it too.

An editable install (`pip install -e .`, scripts/setup.sh) imports the checkout itself: the
registry reader falls back to the top-level file there (specllama/models/registry.py).
"""

from __future__ import annotations

from pathlib import Path

from setuptools.build_meta import *  # noqa: F401,F403  (every PEP 517 hook, unchanged)
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

REGISTRY = "models.toml"
PACKAGED_AS = Path("specllama", "models", REGISTRY)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib, PACKAGED_AS)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(REGISTRY, str(target))


class Sdist(sdist):
    def make_release_tree(self, base_dir, files) -> None:
        # setuptools lists an sdist's files from the package and its manifest; these two are neither.
        super().make_release_tree(base_dir, [*files, REGISTRY, "_custom_build/build_backend.py"])
